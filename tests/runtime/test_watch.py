"""A running query wakes when a file lands in a source directory (streamfold/runtime/watch.py),
instead of waiting out its trigger interval; hidden names do not wake it, an increment's files
landing together wake it once, and without inotify (or with the setting watch off) polling is all."""

from __future__ import annotations

import os
import struct
import sys
import threading
import time

import pytest

from streamfold.runtime import watch
from streamfold.runtime.watch import IN_MOVED_TO, IN_Q_OVERFLOW, SourceWatch, visible_names
from streamfold.settings import Settings

from .test_runtime import put, start

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def _event(name: str, mask: int = IN_MOVED_TO) -> bytes:
    raw = name.encode() + b"\0" * (16 - len(name) % 16) if name else b""
    return struct.pack("iIII", 1, mask, 0, len(raw)) + raw


def test_only_names_the_poll_takes_count():
    events = _event(".part.tmp") + _event("_SUCCESS") + _event("0001.parquet") + _event("b.csv")
    assert visible_names(events) == ["0001.parquet", "b.csv"]
    assert visible_names(_event("", IN_Q_OVERFLOW)) == ["?"]  # events were lost: wake regardless
    assert visible_names(b"") == []


class _Woken:
    def __init__(self) -> None:
        self.count = 0
        self.event = threading.Event()

    def __call__(self) -> None:
        self.count += 1
        self.event.set()


@linux
def test_a_rename_wakes_and_a_hidden_file_does_not(tmp_path):
    woken = _Woken()
    w = SourceWatch([str(tmp_path)], woken)
    assert w.start()
    try:
        hidden = tmp_path / ".writing"
        hidden.write_bytes(b"rows")  # written and closed, but hidden: the poll would not take it
        assert not woken.event.wait(0.2)
        hidden.rename(tmp_path / "0001.parquet")
        assert woken.event.wait(5)
        woken.event.clear()
        (tmp_path / "b.csv").write_text("k,v\n1,2\n")  # written in place and closed
        assert woken.event.wait(5)
    finally:
        w.close()
    assert w.wakes == woken.count == 2


@linux
def test_files_landing_together_wake_once(tmp_path, monkeypatch):
    monkeypatch.setattr(watch, "SETTLE_MAX_S", 5.0)
    woken = _Woken()
    dirs = [tmp_path / "R", tmp_path / "S"]
    for d in dirs:
        d.mkdir()
    w = SourceWatch([str(d) for d in dirs], woken, settle=0.2)
    assert w.start()
    try:
        for i in range(3):  # one increment: a file per source and a second one, a few ms apart
            for d in dirs:
                (d / f".{i}").write_bytes(b"x")
                (d / f".{i}").rename(d / f"{i}.parquet")
            time.sleep(0.01)
        assert woken.event.wait(5)
        time.sleep(0.5)
    finally:
        w.close()
    assert woken.count == 1


def test_without_a_watch_the_poll_is_all(tmp_path, monkeypatch):
    assert not SourceWatch([str(tmp_path)], lambda: None, enabled=False).start()
    monkeypatch.setattr(watch, "_libc", lambda: None)  # no inotify (not Linux)
    assert not SourceWatch([str(tmp_path)], lambda: None).start()
    w = SourceWatch([str(tmp_path / "missing")], lambda: None)  # a directory it cannot watch
    assert not w.start()
    w.close()


@linux
@pytest.mark.spark
@pytest.mark.parametrize("watched", [True, False], ids=["watch", "poll-only"])
def test_a_running_query_takes_a_file_at_once_not_at_its_next_poll(spark, tmp_path, monkeypatch, watched):
    """Polling every 60 s, a query commits a renamed file's batch within seconds; with the watch
    off (the setting watch, given through the run's settings) the file waits for the next poll."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "0.parquet", [(1, 1)])
    q = start(spark, tmp, "SELECT k, sum(v) AS s FROM S GROUP BY k", background=True, trigger=60.0,
              settings=Settings(watch=watched))
    try:
        assert q.wait_for_batch(0, timeout=120) == 0
        time.sleep(0.5)  # the loop is waiting for its next poll, 60 s away
        put(src, ".1.parquet", [(1, 2), (2, 5)])
        os.rename(os.path.join(src, ".1.parquet"), os.path.join(src, "1.parquet"))
        if not watched:
            with pytest.raises(TimeoutError):
                q.wait_for_batch(1, timeout=3)
            return
        assert q.wait_for_batch(1, timeout=30) == 1
        assert sorted(tuple(r) for r in q.snapshot().collect()) == [(1, 3), (2, 5)]
    finally:
        q.stop()


@pytest.mark.parametrize("how", ["wake", "close"])
def test_the_wait_between_polls_ends_on_a_wake_or_a_stop(how):
    """Without a controller too (the engine's NoControl): a wake or a close ends idle() at once."""
    from streamfold.runtime.hooks import NoControl

    hooks, stop = NoControl(), threading.Event()
    ended = threading.Event()
    waiter = threading.Thread(target=lambda: (hooks.idle(60.0, stop), ended.set()))
    waiter.start()
    time.sleep(0.1)
    assert not ended.is_set()
    hooks.wake() if how == "wake" else hooks.close()
    assert ended.wait(5)
    waiter.join()
