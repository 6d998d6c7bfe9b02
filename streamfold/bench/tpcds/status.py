"""Each TPC-DS query's status under ``streamfold explain``: compiled, or refused with its code.

``python -m streamfold.bench.tpcds.status`` prints the table docs/sql.md shows ("TPC-DS").
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import StreamfoldError
from . import ALL_QUERIES, schemas, spark_text, statics


@dataclass(frozen=True)
class Status:
    query: int
    code: str | None  # None: compiled
    reason: str = ""

    @property
    def compiled(self) -> bool:
        return self.code is None


def status(nr: int) -> Status:
    import streamfold

    try:
        streamfold.compile(spark_text(nr), schemas(), tables=statics())
    except StreamfoldError as e:
        return Status(nr, e.code, str(e).split("\n", 1)[0])
    return Status(nr, None)


def table(rows: list[Status]) -> str:
    lines = ["| query | status | reason |", "|---|---|---|"]
    for s in rows:
        lines.append(f"| Q{s.query} | {'compiled' if s.compiled else '`' + str(s.code) + '`'} | "
                     f"{s.reason.replace('|', '/')[:160]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    from . import proof

    ap = argparse.ArgumentParser(prog="python -m streamfold.bench.tpcds.status",
                                 description="TPC-DS queries' status: compiled or refused (default); with --run, "
                                             "exact end to end or not (proof.py), recorded in proof.json.")
    ap.add_argument("--run", action="store_true", help="run the queries end to end against DuckDB")
    ap.add_argument("--queries", help="comma-separated query numbers (default all 99)")
    ap.add_argument("--missing", action="store_true", help="with --run: only queries proof.json has no outcome for")
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--increments", type=int, default=2, help="insert batches before the deleting one")
    ap.add_argument("--out", default=proof.RESULTS, help="the outcomes file (default proof.json)")
    ap.add_argument("--merge", nargs="+", metavar="FILE", help="add other runners' outcomes (their --out) to --out")
    ap.add_argument("--markdown", action="store_true", help="print docs/sql.md's table from proof.json")
    ap.add_argument("--docs", metavar="SQL_MD", help="rewrite the generated table in this docs/sql.md from proof.json")
    args = ap.parse_args(argv)
    chosen = [int(q.strip().lstrip("qQ")) for q in args.queries.split(",")] if args.queries else None
    if args.merge:
        proof.merge(args.merge, args.out)
        return 0
    if args.docs:
        proof.write_docs(args.docs)
        return 0
    if args.markdown:
        print(proof.markdown())
        return 0
    if args.run:
        found = proof.run(chosen, args.sf, args.increments, path=args.out, missing=args.missing)
        print(f"{proof.count_exact(args.out)} of {len(ALL_QUERIES)} exact in proof.json")
        return 0 if all(o.status in ("exact", "refused") for o in found.values()) else 1
    rows = [status(nr) for nr in chosen or ALL_QUERIES]
    print(f"{sum(s.compiled for s in rows)} of {len(rows)} compile")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
