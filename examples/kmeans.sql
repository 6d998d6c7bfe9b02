-- k-means, 10 Lloyd steps, over a growing set of points(x DOUBLE, y DOUBLE), from the initial
-- centroids of a static table centroids0(x DOUBLE, y DOUBLE).
--   streamfold run examples/kmeans.sql --source points=DIR --table centroids0=FILE --output OUT
-- A cluster keeps the coordinates (x0, y0) of the initial centroid it descends from, so it can
-- be told apart from the others as its centroid (x, y) moves. One step: every point joins the
-- centroid(s) no other centroid is strictly closer to (on an exact tie, each of them), and each
-- cluster's centroid becomes the mean of its points; a cluster left without points disappears.
-- Every snapshot is the 10-step answer over all points so far (MODE EXACT).
WITH ITERATIVE clusters (x0, y0, x, y) AS (
    SELECT DISTINCT x, y, x, y FROM centroids0
  STEP
    SELECT c.x0, c.y0, avg(p.x), avg(p.y)
    FROM points p CROSS JOIN clusters c
    WHERE NOT EXISTS (
        SELECT 1 FROM clusters o
        WHERE (p.x - o.x) * (p.x - o.x) + (p.y - o.y) * (p.y - o.y)
            < (p.x - c.x) * (p.x - c.x) + (p.y - c.y) * (p.y - c.y))
    GROUP BY c.x0, c.y0
  TIMES 10
)
SELECT x, y FROM clusters
