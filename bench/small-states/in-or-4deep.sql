-- Issue 58, "big plans on small data": IN (SELECT ...) nested four deep under AND/OR over one
-- small table t(id, grp, val); 34 states, one join matrix (the OR).
SELECT id, grp, val FROM t
WHERE (val > 10 AND id IN (SELECT id FROM t WHERE grp IN (SELECT grp FROM t WHERE val IN (
          SELECT val FROM t WHERE id IN (SELECT id FROM t WHERE val < 80)))))
   OR (grp = 'b' AND id IN (SELECT id FROM t WHERE val IN (SELECT val FROM t WHERE grp IN (
          SELECT grp FROM t WHERE id IN (SELECT id FROM t WHERE val > 20)))))
