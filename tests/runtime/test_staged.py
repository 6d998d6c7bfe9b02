"""The staging seam (issue 54) without Spark: which specs are staged where, the positions a
commit records, the directories that wake the poll, the endpoint spellings."""

from __future__ import annotations

import os

import pytest

from streamfold.errors import UsageError
from streamfold.runtime.config import input_specs
from streamfold.runtime.sources import InputSpec
from streamfold.runtime.staged import positions, staged_specs, staged_version, watched_paths


def test_a_delta_source_is_read_from_its_staging_directory_in_the_checkpoint(tmp_path):
    specs = staged_specs([InputSpec("T", "/data/t", "delta"), InputSpec("S", "/data/s", "csv")], str(tmp_path))
    assert specs[0] == InputSpec("T", os.path.join(str(tmp_path), "sources", "T"), "parquet", origin="/data/t")
    assert specs[1] == InputSpec("S", "/data/s", "csv")
    assert staged_specs(specs, "/elsewhere") == specs  # staged once


def test_delta_is_spelled_path_colon_delta_or_as_a_format():
    streams, _ = input_specs({"A": "/t/a:delta", "B": "/t/b", "C": "/t/c:delta"}, formats={"B": "delta"})
    assert [(s.path, s.format) for s in streams] == [("/t/a", "delta"), ("/t/b", "delta"), ("/t/c", "delta")]
    assert InputSpec.parse("T=/t/x:delta").format == "delta"
    with pytest.raises(UsageError) as e:
        input_specs({"A": "/t/a"}, formats={"A": "iceberg"})
    assert e.value.code == "BAD_FORMAT"


def test_a_commit_records_the_versions_and_micro_batches_its_staged_files_cover():
    inputs = {"T": ["delta-v00000000000000000003-v00000000000000000005",
                    "delta-v00000000000000000006-v00000000000000000006"],
              "S": ["spark-b00000000000000000007", "spark-b00000000000000000008"], "F": ["0001.parquet"]}
    assert positions(inputs) == {"T": {"kind": "delta", "first_version": 3, "version": 6},
                                 "S": {"kind": "spark", "batch_ids": [7, 8]}}


def test_the_next_version_is_read_back_from_the_staged_names_hidden_ones_ignored(tmp_path):
    assert staged_version(str(tmp_path)) == -1
    os.makedirs(tmp_path / "delta-v00000000000000000000-v00000000000000000004")
    os.makedirs(tmp_path / ".delta-v00000000000000000005-v00000000000000000009.tmp")  # a killed write
    assert staged_version(str(tmp_path)) == 4


def test_a_delta_sources_log_wakes_the_poll():
    specs = staged_specs([InputSpec("T", "/data/t", "delta"), InputSpec("S", "/data/s"),
                          InputSpec("D", "/data/d", static=True)], "/ck")
    assert watched_paths(specs) == ["/ck/sources/T", "/data/s", "/data/t/_delta_log"]
