"""Waking the poll when a file lands in a source directory, instead of waiting out the trigger.

A running query polls its source directories every ``--trigger`` seconds (1 s by default), so a
file renamed into one waits on average half the interval before its batch starts — at the
default, more of the latency a user sees than a warm batch of the seed's groupBy costs
(docs/journal.md, "Stop 40"). On Linux, :class:`SourceWatch` asks the kernel (inotify)
to report names renamed into or written and closed in each stream's directory, and ends the
wait between two polls as soon as one arrives (:meth:`.hooks.BatchControl.wake`). The poll is
still the only reader of the directories: the watch changes when it looks, never what it takes,
so the batches and their files are what polling at that moment would give — a run with a watch
is exactly as durable and as exact as one without. The trigger interval stays the fallback
(file systems that do not report changes, such as NFS, or a machine without inotify) and keeps
its meaning for ``--until-idle``. The A/B switch ``watch`` off turns the watch off (``streamfold/settings.py``).

Names the poll ignores (starting with ``.`` or ``_``: a writer's hidden file before its rename)
do not wake it. Files of one increment often land a few microseconds apart (one per source), so
after the first event the watch waits until the directories have been quiet for
:data:`SETTLE_S` (at most :data:`SETTLE_MAX_S`) and then wakes the poll once, which takes them
in one batch rather than one batch per file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence

log = logging.getLogger("streamfold")

IN_CLOSE_WRITE = 0x00000008  # a file opened for writing was closed
IN_MOVED_TO = 0x00000080  # a name was renamed into the directory
IN_Q_OVERFLOW = 0x00004000  # the kernel dropped events: wake anyway
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)
SETTLE_S = 0.005  # quiet time after the first event before the poll is woken
SETTLE_MAX_S = 0.05  # never settle longer than this after the first event


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1  # noqa: B018 - raises AttributeError where there is no inotify
        libc.inotify_add_watch  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def visible_names(buffer: bytes) -> list[str]:
    """The names of the events in ``buffer`` (raw inotify events) that the poll would take (not
    hidden); ``["?"]`` when the kernel reports an overflow (events were lost: wake regardless)."""
    names: list[str] = []
    offset = 0
    while offset + _EVENT.size <= len(buffer):
        _, mask, _, length = _EVENT.unpack_from(buffer, offset)
        offset += _EVENT.size
        name = buffer[offset:offset + length].rstrip(b"\0").decode("utf-8", "replace")
        offset += length
        if mask & IN_Q_OVERFLOW:
            names.append("?")
        elif name and not name.startswith((".", "_")):
            names.append(name)
    return names


class SourceWatch:
    """Calls ``wake`` when a file the poll would take lands in one of ``paths`` (see the module
    docstring). :meth:`start` says whether it watches; without inotify the poll's interval is all."""

    def __init__(self, paths: Sequence[str], wake: Callable[[], None], settle: float = SETTLE_S,
                 enabled: bool = True) -> None:
        self.paths = sorted(set(paths))
        self.wake = wake
        self.settle = settle
        self.enabled = enabled  # the setting ``watch``: off, polling is all
        self.wakes = 0  # times the poll was woken (tests, the log)
        self._fd: int | None = None
        self._stop_r: int | None = None
        self._stop_w: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        if not self.enabled:
            log.debug("no source watch (the watch setting is off): polling only")
            return False
        libc = _libc()
        if libc is None or not self.paths:
            log.debug("no source watch (%s): polling only", "no inotify" if libc is None else "no stream source")
            return False
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            log.debug("no source watch (inotify_init1: %s): polling only", os.strerror(ctypes.get_errno()))
            return False
        for path in self.paths:
            if libc.inotify_add_watch(fd, os.fsencode(path), IN_MOVED_TO | IN_CLOSE_WRITE) < 0:
                log.debug("no source watch on %s (%s): polling only", path, os.strerror(ctypes.get_errno()))
                os.close(fd)
                return False
        self._fd = fd
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._loop, name="streamfold-watch", daemon=True)
        self._thread.start()
        return True

    def close(self) -> None:
        if self._thread is not None and self._stop_w is not None:
            os.write(self._stop_w, b"x")
            self._thread.join()
        for fd in (self._fd, self._stop_r, self._stop_w):
            if fd is not None:
                os.close(fd)
        self._fd = self._stop_r = self._stop_w = None
        self._thread = None

    def _read(self) -> list[str]:
        assert self._fd is not None
        names: list[str] = []
        while True:
            try:
                chunk = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                return names
            if not chunk:
                return names
            names += visible_names(chunk)

    def _loop(self) -> None:
        assert self._fd is not None and self._stop_r is not None
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._stop_r in ready:
                return
            if not self._read():
                continue
            first = time.monotonic()
            while time.monotonic() - first < SETTLE_MAX_S:  # until the directories are quiet
                ready = {fd for fd, _ in poller.poll(self.settle * 1000)}
                if self._stop_r in ready:
                    return
                if not ready:
                    break
                self._read()
            self.wakes += 1
            self.wake()
