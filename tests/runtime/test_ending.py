"""A run whose Spark never stops still ends (issue 59, item 5): after an OutOfMemoryError a JVM
thread may never answer, and the process hung after printing its BATCH_FAILED."""

from __future__ import annotations

import subprocess
import sys
import time

from streamfold import cli

# A process whose stop never returns and that holds a thread which never ends (as py4j's would).
_HANGING = """
import threading, time
from streamfold import cli
threading.Thread(target=lambda: time.sleep(3600)).start()
def run():
    cli.stop_within(lambda: time.sleep(3600), 0.2)
    raise cli.StreamfoldError("batch 0 failed: java.lang.OutOfMemoryError: Java heap space", code="BATCH_FAILED")
raise SystemExit(cli._guarded(run))
"""


def test_a_stop_that_never_returns_ends_the_process():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _HANGING], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == cli.EXIT_USAGE
    assert "OutOfMemoryError" in done.stderr and "did not stop" in done.stderr


def test_a_stop_in_time_is_waited_for_and_its_error_raised():
    stopped = []
    assert cli.stop_within(lambda: stopped.append(True), 5.0) and stopped
    try:
        cli.stop_within(lambda: 1 / 0, 5.0)
    except ZeroDivisionError:
        pass
    else:
        raise AssertionError("the stop's error is raised")
    assert not cli._STOP_HUNG.is_set()
