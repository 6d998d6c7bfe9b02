"""Proof of exactness for every compiling TPC-DS query: each runs end to end over a tiny data set
(a history, increments, a deleting batch; DuckDB after every batch, :func:`.run.run_query`), all in
one Spark session, and its outcome is written to :data:`RESULTS` — the file docs/sql.md's TPC-DS
table is generated from (:func:`markdown`; ``tests/joins/test_tpcds.py`` checks the two agree).

``python -m streamfold.bench.tpcds.status --run [--queries 10,35] [--sf 0.01] [--increments 2]``
runs the queries (all 99 by default; a refused one is recorded with its code) and merges their outcomes into the file, query by
query as each finishes, so a run that is stopped keeps what it proved; ``--missing`` runs only the
queries the file has no outcome for.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass

from . import ALL_QUERIES

RESULTS = os.path.join(os.path.dirname(__file__), "proof.json")
COMMAND = "python -m streamfold.bench.tpcds.status --run"


@dataclass
class Outcome:
    query: int
    status: str  # exact | wrong | failed | refused
    batch: int | None = None  # wrong or failed: the first batch that was
    code: str | None = None  # failed or refused: the error's code
    message: str = ""
    seconds: float = 0.0

    def label(self) -> str:
        if self.status == "exact":
            return "exact"
        if self.status == "wrong":
            return f"wrong at batch {self.batch}"
        if self.status == "failed":
            return f"failed at batch {self.batch}: `{self.code}`" if self.batch is not None else f"failed: `{self.code}`"
        return f"refused: `{self.code}`"


def load(path: str = RESULTS) -> dict:
    if not os.path.exists(path):
        return {"sf": None, "batches": None, "queries": {}}
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def outcomes(path: str = RESULTS) -> dict[int, Outcome]:
    return {int(k): Outcome(**v) for k, v in load(path)["queries"].items()}


def _save(doc: dict, path: str) -> None:
    doc["queries"] = {str(k): doc["queries"][k] for k in sorted(doc["queries"], key=int)}
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, path)


def outcome_of(nr: int, ds, spark, workdir: str) -> Outcome:
    """Query ``nr`` end to end: its first wrong or failed batch, or exact."""
    from . import run as tpcds

    started = time.monotonic()
    try:
        r = tpcds.run_query(nr, ds, spark, workdir)
    except Exception as e:  # a failure outside a batch (the JVM gone, …) is this query's outcome
        traceback.print_exc()
        return Outcome(nr, "failed", None, type(e).__name__, str(e).split("\n")[0][:300],
                       round(time.monotonic() - started, 1))
    seconds = round(time.monotonic() - started, 1)
    if r.status == "refused":
        return Outcome(nr, "refused", None, r.code, r.message[:300], seconds)
    if r.status == "ERROR":
        return Outcome(nr, "failed", len(r.batches), r.code, r.message[:300], seconds)
    wrong = [i for i, b in enumerate(r.batches) if b != "ok"]
    if wrong:
        return Outcome(nr, "wrong", wrong[0], None, r.message[:300], seconds)
    return Outcome(nr, "exact", None, None, "", seconds)


def run(queries: list[int] | None, sf: float, increments: int, path: str = RESULTS, missing: bool = False,
        data_root: str | None = None) -> dict[int, Outcome]:
    """Run ``queries`` (all 99 if None; a refused one is recorded as such) in one Spark session;
    merge their outcomes into ``path``."""
    from ...runtime.session import get_spark
    from . import data as tpcds_data

    doc = load(path)
    if doc.get("sf") not in (None, sf) or doc.get("batches") not in (None, increments + 1):
        doc = {"queries": {}}  # outcomes over other data do not mix
    doc.update(sf=sf, batches=increments + 1, command=COMMAND)
    chosen = list(queries or ALL_QUERIES)
    if missing:
        chosen = [nr for nr in chosen if str(nr) not in doc["queries"]]
    root = data_root or os.path.join(tempfile.gettempdir(), "streamfold-tpcds-proof")
    ds = tpcds_data.ensure(os.path.join(root, "data"), sf=sf, batches=increments)
    spark = get_spark(app_name="streamfold-tpcds-proof")
    found = {}
    for nr in chosen:
        o = outcome_of(nr, ds, spark, os.path.join(root, "work"))
        found[nr] = o
        doc["queries"][str(nr)] = asdict(o)
        _save(doc, path)
        print(f"Q{nr}: {o.label()} {o.seconds:.1f} s {o.message[:200]}", flush=True)
    return found


def merge(sources: list[str], path: str = RESULTS) -> None:
    """Add the outcomes of other runners' files (``--out``, runs side by side over the same data)
    to ``path``; a file over other data is refused."""
    doc = load(path)
    for src in sources:
        other = load(src)
        if doc.get("sf") is None:
            doc.update(sf=other["sf"], batches=other["batches"], command=COMMAND)
        if (other["sf"], other["batches"]) != (doc["sf"], doc["batches"]):
            raise SystemExit(f"{src}: SF {other['sf']} with {other['batches']} batches, not {doc['sf']}/{doc['batches']}")
        doc.setdefault("queries", {}).update(other["queries"])
    _save(doc, path)


def markdown(path: str = RESULTS) -> str:
    """The table docs/sql.md shows: each query's proven status (compiled ones) or refusal."""
    got = outcomes(path)
    doc = load(path)
    lines = [f"Each query's outcome end to end at SF {doc.get('sf')} ({doc.get('batches')} batches, the last "
             f"deleting), written by `{COMMAND}` to `streamfold/bench/tpcds/proof.json`:", "",
             "| query | status | query | status | query | status |", "|---|---|---|---|---|---|"]
    cells = []
    for nr in ALL_QUERIES:
        cells.append((f"Q{nr}", got[nr].label() if nr in got else "not run"))
    third = (len(cells) + 2) // 3
    for i in range(third):
        row = [c for j in range(3) if i + j * third < len(cells) for c in cells[i + j * third]]
        row += [""] * (6 - len(row))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


BEGIN, END = "<!-- tpcds-proof: generated by --docs, do not edit -->", "<!-- tpcds-proof: end -->"


def docs_section(text: str) -> str | None:
    """The generated part of docs/sql.md's text, or None without its markers."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def write_docs(docs: str, path: str = RESULTS) -> None:
    """Replace docs/sql.md's generated TPC-DS table with :func:`markdown` of ``path``."""
    with open(docs, encoding="utf-8") as fh:
        text = fh.read()
    if docs_section(text) is None:
        raise SystemExit(f"{docs}: no {BEGIN} … {END} markers")
    head, rest = text.split(BEGIN, 1)
    with open(docs, "w", encoding="utf-8") as fh:
        fh.write(head + BEGIN + "\n" + markdown(path) + "\n" + END + rest.split(END, 1)[1])


def count_exact(path: str = RESULTS) -> int:
    return sum(o.status == "exact" for o in outcomes(path).values())
