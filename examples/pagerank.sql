-- PageRank, 10 steps, over a growing graph: edges(src BIGINT, dst BIGINT).
--   streamfold run examples/pagerank.sql --source edges=DIR --output OUT
-- The nodes are every src and dst; every rank starts at 1/N; one step is
--   rank(v) = (1 − 0.85)/N + 0.85 · Σ over edges u→v of rank(u) / outdegree(u)
-- (a node without outgoing edges passes its rank to nobody). Edges are a bag: an edge given
-- twice counts twice. Every snapshot is the 10-step PageRank of all edges so far (MODE EXACT,
-- the default: the nodes, N and the out-degrees are kept up to date, and a batch that brings
-- edges runs the ten steps over them).
WITH nodes AS (SELECT src AS node FROM edges UNION SELECT dst FROM edges),
     total AS (SELECT CAST(count(*) AS DOUBLE) AS n FROM nodes),
     outdeg AS (SELECT src, count(*) AS deg FROM edges GROUP BY src),
     links AS (SELECT e.src, e.dst, o.deg FROM edges e JOIN outdeg o ON e.src = o.src),
     ITERATIVE ranks (node, rank) AS (
         SELECT node, 1.0D / n FROM nodes CROSS JOIN total
       STEP
         SELECT v.node, 0.15D / t.n + 0.85D * coalesce(c.rank, 0.0D)
         FROM nodes v
         CROSS JOIN total t
         LEFT JOIN (SELECT l.dst, sum(r.rank / l.deg) AS rank
                    FROM ranks r JOIN links l ON l.src = r.node
                    GROUP BY l.dst) c ON c.dst = v.node
       TIMES 10
     )
SELECT node, rank FROM ranks
