-- Issue 58: IN subqueries under AND and OR, nested three and four deep, over one small table.
SELECT id, grp, val FROM t
WHERE val > 10 AND id IN (SELECT id FROM t WHERE grp IN (SELECT grp FROM t WHERE val IN (
          SELECT val FROM t WHERE id IN (SELECT id FROM t WHERE val < 80))))
  AND (grp IN (SELECT grp FROM t WHERE val > 50)
       OR val IN (SELECT val FROM t WHERE grp IN (SELECT grp FROM t WHERE id IN (SELECT id FROM t WHERE val > 20))))
