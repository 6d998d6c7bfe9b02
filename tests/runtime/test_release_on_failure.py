"""A failing batch reports its own error, not its cleanup's (issue 59: TPC-DS Q78's
``OutOfMemoryError`` ended Spark's JVM, and releasing the batch's views then raised py4j's
``ConnectionRefusedError`` out of the engine in place of the batch's ``BATCH_FAILED``)."""

from __future__ import annotations

import pytest

from streamfold.runtime.steps import release_batch


class _GoneViews:
    def drop(self) -> None:
        raise ConnectionRefusedError(111, "Connection refused")


def test_cleanup_of_a_failing_batch_does_not_replace_its_error():
    release_batch(_GoneViews(), [], [], None, failed=True)  # type: ignore[arg-type]


def test_cleanup_of_a_committed_batch_still_raises():
    with pytest.raises(ConnectionRefusedError):
        release_batch(_GoneViews(), [], [], None)  # type: ignore[arg-type]
