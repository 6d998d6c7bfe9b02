"""Bind a parsed query to the logical IR.

The shape produced for one SELECT block is the textbook one::

    Limit? ← Sort? ← Project(select list [+ hidden sort columns]) ← Filter(HAVING)?
        ← Aggregate(GROUP BY keys, aggregate calls)?  ← Filter(WHERE)? ← joins of Scans

Output names follow Spark's rules closely enough for ``explain``; the runtime takes the exact
names and types from Spark's own analysis of the query.

:func:`bind` (:mod:`.query`) dispatches each query by kind; one module per clause binds the rest:
:mod:`.ctes` (WITH, WITH ITERATIVE, WITH RECURSIVE), :mod:`.setops`, :mod:`.select` (a block,
clause by clause), :mod:`.from_clause` (sources, derived tables, joins), :mod:`.generators`
(explode), :mod:`.select_list`, :mod:`.grouping` (GROUP BY, aggregates, HAVING) and
:mod:`.order` (ORDER BY, LIMIT). Expressions are bound by :mod:`..bind_expr`.
"""

from .query import BoundQuery, bind, check_output_names

__all__ = ["BoundQuery", "bind", "check_output_names"]
