"""Front end: parse Spark-dialect SQL with sqlglot and bind it to streamfold's IR.

This package is the only place sqlglot trees exist; everything it returns is IR.
"""

from .bind import BoundQuery, bind
from .catalog import Catalog, SourceSchema
from .parse import ParsedQuery, parse_query

__all__ = ["BoundQuery", "Catalog", "ParsedQuery", "SourceSchema", "bind", "parse_query"]
