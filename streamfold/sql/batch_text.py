"""The batch query as the recompute strategy gives it to Spark, with streamfold's meaning.

A recompute (``runtime/recompute.py``) runs the query's own text over every file so far. Two
places where Spark's batch plan answers otherwise than the incremental plan (and DuckDB, the
oracle) are handled here:

* **Division by zero.** streamfold divides in the NULL-on-zero form (``ir/printer.py``: an
  incremental plan evaluates expressions over rows the batch query never has at the end), and
  docs/sql.md promises NULL; Spark's ANSI mode stops the query. :func:`tolerant_division` writes
  ``a / b`` as ``try_divide(a, b)``, ``a % b`` as ``try_mod(a, b)`` and ``a DIV b`` as
  ``a DIV nullif(b, 0)``: the same types, NULL where the divisor is zero.
* **An IN subquery whose NULL is observable.** Spark rewrites ``x IN (SELECT …)`` outside a
  filter into an existence join that answers FALSE where SQL answers NULL (``x`` NULL, or no
  match and a NULL among the subquery's values; apache/spark#58186, open). Where the IN (or NOT
  IN) is in a WHERE or HAVING under ANDs and ORs only, FALSE and NULL both drop the row and the
  answers agree; anywhere else (:func:`null_observable_in`) the query is not recomputed — the incremental plan
  keeps SQL's NULL.
* **Ties of ``max_by`` and ``min_by``.** Spark answers the ``x`` of whichever tied row it reads
  last; the incremental plan breaks the tie by ``x`` (``sql/bind_expr/extremes.py``).
  :func:`deterministic_extremes` writes each as the extreme of the pair ``(y, x)`` it is kept as,
  so a recompute gives the same answer and a switch between the strategies changes no row.
"""

from __future__ import annotations

from sqlglot import exp, transforms
from sqlglot.dialects.spark import Spark


class SparkText(Spark):
    """sqlglot's Spark dialect writing ``QUALIFY`` as Spark 4 reads it. sqlglot's writer moves a
    QUALIFY into a derived table, whose ``SELECT *`` then outputs the window column too and
    whose ORDER BY no longer orders the answer; Spark 4.3 reads the clause itself."""

    class Generator(Spark.Generator):  # type: ignore[valid-type,misc]  # sqlglot assigns it at class creation
        TRANSFORMS = {
            **Spark.Generator.TRANSFORMS,
            exp.Select: transforms.preprocess([transforms.eliminate_distinct_on, transforms.unnest_to_explode,
                                               transforms.any_to_exists]),
        }


def tolerant_division(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` whose divisions give NULL for a zero divisor (module docstring)."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Div):
            return exp.func("try_divide", node.this, node.expression)
        if isinstance(node, exp.Mod):
            return exp.func("try_mod", node.this, node.expression)
        if isinstance(node, exp.IntDiv):
            return exp.IntDiv(this=node.this, expression=exp.Nullif(this=node.expression,
                                                                      expression=exp.Literal.number(0)))
        return node

    return tree.copy().transform(rewrite)


def deterministic_extremes(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` with ``max_by(x, y)`` as ``max(IF(y IS NULL, NULL, STRUCT(y AS y, x AS x))).x``
    (``min_by`` with ``min``), a FILTER kept on the ``max`` (module docstring)."""

    def pair_extreme(call: exp.Expr) -> exp.Expr:
        y, x = call.expression.copy(), call.this.copy()
        pair = exp.If(this=exp.Is(this=y, expression=exp.Null()), true=exp.Null(),
                      false=exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("y"), expression=y.copy()),
                                                    exp.PropertyEQ(this=exp.to_identifier("x"), expression=x)]))
        return (exp.Max if isinstance(call, exp.ArgMax) else exp.Min)(this=pair)

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Filter) and isinstance(node.this, (exp.ArgMax, exp.ArgMin)):
            inner = exp.Filter(this=pair_extreme(node.this), expression=node.expression.copy())
            return exp.Dot(this=exp.Paren(this=inner), expression=exp.to_identifier("x"))
        if isinstance(node, (exp.ArgMax, exp.ArgMin)) and not isinstance(node.parent, exp.Filter):
            return exp.Dot(this=pair_extreme(node), expression=exp.to_identifier("x"))
        return node

    return tree.copy().transform(rewrite)


def null_observable_in(tree: exp.Expr) -> bool:
    """Whether ``tree`` has an ``IN (subquery)`` whose NULL answer a row could show: one that is
    not in a WHERE or HAVING under ANDs and ORs only (a NOT right on it included: Spark's
    null-aware anti join), where NULL and FALSE both drop the row (module docstring)."""
    for node in tree.find_all(exp.In):
        if node.args.get("query") is None:
            continue
        up: exp.Expr | None = node.parent
        while isinstance(up, exp.Paren):
            up = up.parent
        if isinstance(up, exp.Not):  # NOT IN: Spark's null-aware anti join
            up = up.parent
        while isinstance(up, (exp.And, exp.Or, exp.Paren)):
            up = up.parent
        if not isinstance(up, (exp.Where, exp.Having)):
            return True
    return False


def spark_spellings(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` that sqlglot writes as Spark reads it: sqlglot's Spark dialect writes
    ``percentile_cont(p) WITHIN GROUP (ORDER BY x)`` (and ``percentile_disc``, dropping a DESC) as
    ``percentile_approx(x, p)``, another aggregate (approximate); here it stays the exact one,
    spelled as Spark spells it. It writes
    ``listagg(x)`` as ``listagg(x, ',')``; here its separator stays Spark's default."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, (exp.PercentileCont, exp.PercentileDisc)) and isinstance(node.parent, exp.WithinGroup):
            name = "PERCENTILE_CONT" if isinstance(node, exp.PercentileCont) else "PERCENTILE_DISC"
            return exp.Anonymous(this=name, expressions=[node.this.copy()])
        if isinstance(node, exp.GroupConcat) and node.args.get("separator") is None:
            node.set("separator", exp.Null())  # Spark's default (no separator); sqlglot would write ','
        return node

    return tree.transform(rewrite)
