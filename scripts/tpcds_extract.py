"""Write TPC-DS's 99 query texts and the tables' columns into streamfold/bench/tpcds/ (issue 59).

The texts are DuckDB's (its ``tpcds`` extension: the qualification parameters). The extension
package pins the DuckDB it loads into (duckdb-extension-tpcds 1.5.5 needs duckdb 1.5.5, not the
project's), so this runs once, by hand, in a throwaway target directory, and the output is
committed::

    .venv/bin/pip install --target /tmp/duck155 duckdb==1.5.5 duckdb-extension-tpcds==1.5.5
    PYTHONPATH=/tmp/duck155 .venv/bin/python scripts/tpcds_extract.py
"""

from __future__ import annotations

import glob
import os

import duckdb  # the one in PYTHONPATH: 1.5.5

HERE = os.path.join(os.path.dirname(__file__), "..", "streamfold", "bench", "tpcds")


def main() -> None:
    import duckdb_extension_tpcds  # noqa: F401 - only to find its file

    ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_tpcds.__file__), "extensions", "*",
                                 "tpcds.duckdb_extension"))[0]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.sql(f"LOAD '{ext}'")
    for nr, text in con.sql("SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall():
        with open(os.path.join(HERE, "queries", f"q{nr:02d}.sql"), "w", encoding="utf-8") as fh:
            fh.write(text.strip() + "\n")
    con.sql("CALL dsdgen(sf=0)")
    lines = ['"""TPC-DS\'s tables and their columns, as DuckDB\'s dsdgen creates them (scripts/tpcds_extract.py)."""',
             "", "SCHEMAS = {"]
    for (table,) in con.sql("SELECT DISTINCT table_name FROM duckdb_columns() WHERE schema_name = 'main' AND NOT internal ORDER BY 1").fetchall():
        cols = con.sql(f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = '{table}' "
                       "ORDER BY column_index").fetchall()
        spark = ", ".join(f"{c} {t.replace('VARCHAR', 'STRING').replace('INTEGER', 'INT')}" for c, t in cols)
        lines.append(f'    "{table}": "{spark}",')
    lines.append("}")
    with open(os.path.join(HERE, "schemas.py"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
