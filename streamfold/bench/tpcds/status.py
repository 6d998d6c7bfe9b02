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


if __name__ == "__main__":
    found = [status(nr) for nr in ALL_QUERIES]
    print(f"{sum(s.compiled for s in found)} of {len(found)} compile")
    print(table(found))
