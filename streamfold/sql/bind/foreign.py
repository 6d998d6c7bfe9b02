"""Other dialects' clauses that sqlglot reads in Spark SQL text but the binder has no meaning for.

sqlglot's parser is shared by its dialects, so ``LIMIT 10 PERCENT``, ``SELECT … INTO t``,
``GROUP BY … WITH TOTALS`` or ``* ILIKE 'p%'`` parse in a Spark query as well, into arguments
of the nodes that the binder never reads — and sqlglot's Spark writer drops several of them, so
Spark would not refuse them either: the query would silently mean something else. Each is
refused here, before binding, as ``UNSUPPORTED_CLAUSE``.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedError
from .context import BindContext

# node type → {argument: what it is}: arguments the binder does not read
_FOREIGN: dict[type[exp.Expr], dict[str, str]] = {
    exp.Select: {"into": "SELECT … INTO", "kind": "SELECT AS STRUCT/VALUE", "locks": "FOR UPDATE/SHARE",
                 "match": "MATCH_RECOGNIZE", "prewhere": "PREWHERE", "settings": "SETTINGS", "format": "FORMAT",
                 "options": "OPTION (…)", "for_": "FOR XML/JSON", "exclude": "EXCLUDE",
                 "operation_modifiers": "a query modifier"},
    exp.Limit: {"limit_options": "LIMIT … PERCENT / WITH TIES"},
    exp.Group: {"totals": "WITH TOTALS"},
    exp.Ordered: {"with_fill": "WITH FILL"},
    exp.Star: {"ilike": "* ILIKE"},
    exp.Table: {"ordinality": "WITH ORDINALITY", "only": "ONLY", "changes": "CHANGES", "when": "a table's WHEN",
                "rows_from": "ROWS FROM", "pattern": "a table's PATTERN", "indexed": "INDEXED BY"},
    exp.Join: {"directed": "a directed join", "global_": "GLOBAL JOIN", "match_condition": "MATCH_CONDITION",
               "nearest": "a nearest join"},
}


def refuse_foreign(ctx: BindContext, tree: exp.Expr) -> None:
    """Raise ``UNSUPPORTED_CLAUSE`` at the first clause of another dialect in ``tree``."""
    for node in tree.walk():
        for arg, what in _FOREIGN.get(type(node), {}).items():
            if node.args.get(arg):
                raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", f"{what} is not Spark SQL", node,
                              "write the query in Spark SQL; docs/sql.md lists what is supported", construct=what)
