"""What a sink holds, as rows to compare with DuckDB's answer: ``streamfold.bench.sink_check``
(the bench checks its sinks the same way)."""

from streamfold.bench.sink_check import delta_rows, plain, postgres_rows, sinks_difference

__all__ = ["delta_rows", "plain", "postgres_rows", "sinks_difference"]
