-- Transitive closure of a growing graph edges(src BIGINT, dst BIGINT): every pair (src, dst)
-- with a path of one or more edges from src to dst.
--   streamfold run examples/reachability.sql --source edges=DIR --output OUT
-- WITH RECURSIVE keeps the CTE as a set and runs to the fixpoint, cycles included. With
-- insert-only edges a batch continues from the old closure (semi-naive: only pairs a new edge
-- makes reachable are derived); when edges are deleted (_weight −1) the closure is computed
-- again and its change passed on.
WITH RECURSIVE tc (src, dst) AS (
    SELECT src, dst FROM edges
  UNION
    SELECT tc.src, e.dst FROM tc JOIN edges e ON tc.dst = e.src
)
SELECT src, dst FROM tc
