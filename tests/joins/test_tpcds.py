"""TPC-DS (issue 59): every query of the 99 compiles or is refused with the code this file
expects, and a handful run end to end — fact tables streamed in two batches and a deletion batch,
dimensions static — equal to DuckDB's answer (the extension's own text) after every batch.

The handful are the shapes issue 59 added: Q6 (a scalar subquery over ``date_dim`` that is no
aggregate), Q8 (INTERSECT of zip codes from a dimension's subquery), Q44 (a scalar subquery grouped
by a key its WHERE fixes, under rank() OVER without PARTITION BY), Q12 (a ratio over `sum(sum(…)) OVER (PARTITION BY …)`, a class that sold nothing
divided by zero), Q27 (ROLLUP with grouping()), Q59 (ratios of decimal sums, Spark's 20 digits),
Q78 (24 states whose outputs, stacked into one relation, once died of memory when collected).
"""

from __future__ import annotations

import pytest

import os

from streamfold.bench.tpcds import ALL_QUERIES
from streamfold.bench.tpcds import data as tpcds_data
from streamfold.bench.tpcds import proof
from streamfold.bench.tpcds import run as tpcds
from streamfold.bench.tpcds.status import status

# The queries refused today and why (docs/sql.md, "TPC-DS"). When one starts compiling, delete it.
EXPECTED_REFUSALS = {41: "NO_STREAM", 51: "WINDOW_ORDER_NOT_TOTAL"}
END_TO_END = (6, 8, 12, 27, 44, 59, 78)


def test_every_query_compiles_or_is_refused_as_expected():
    found = {nr: status(nr) for nr in ALL_QUERIES}
    refused = {nr: s.code for nr, s in found.items() if not s.compiled}
    assert refused == EXPECTED_REFUSALS, "update EXPECTED_REFUSALS (and docs/sql.md, TPC-DS) if deliberate"
    assert all(s.reason for s in found.values() if not s.compiled)


def test_docs_table_is_generated_from_the_proof_runners_outcomes():
    """docs/sql.md's TPC-DS table is proof.json's (``status --docs docs/sql.md`` after ``--run``),
    and the runner's refusals are the ones the compiler gives today."""
    docs = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "sql.md")
    with open(docs, encoding="utf-8") as fh:
        assert proof.docs_section(fh.read()) == proof.markdown(), "run: python -m streamfold.bench.tpcds.status --docs docs/sql.md"
    found = proof.outcomes()
    assert {nr: o.code for nr, o in found.items() if o.status == "refused"} == {
        nr: c for nr, c in EXPECTED_REFUSALS.items() if nr in found}


@pytest.fixture(scope="session")
def tpcds_dataset(tmp_path_factory):
    return tpcds_data.ensure(str(tmp_path_factory.getbasetemp() / "tpcds-data"))


@pytest.mark.spark
@pytest.mark.parametrize("nr", END_TO_END, ids=[f"q{n:02d}" for n in END_TO_END])
def test_tpcds_query_equals_duckdb_after_every_batch(nr, spark, tpcds_dataset, tmp_path):
    # Q6 is also timed as `streamfold bench tpcds` times it: streamfold's time to each commit and
    # Spark recomputing the query over the same prefix (the deletion batch netted)
    timed = nr == 6
    result = tpcds.run_query(nr, tpcds_dataset, spark, str(tmp_path), timed=timed)
    assert result.status == "passes", f"Q{nr} {result.status} [{result.code}]: {result.message}"
    assert result.batches == ["ok"] * tpcds_dataset.total_batches
    if timed:
        assert [t["batch"] for t in result.times] == list(range(tpcds_dataset.total_batches))
        assert [t["deletes"] for t in result.times] == [False] * tpcds_dataset.batches + [True]
        assert all(t["streamfold_s"] > 0 and t["recompute_s"] > 0 and t["strategy"] for t in result.times)

