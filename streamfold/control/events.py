"""What happened to a running query, in order, for pages that poll or stream (``/v1/events``).

Each event has a sequence number; a client asks for the events after the last it saw and waits
up to a timeout for new ones (long polling), or streams them. The last :data:`KEPT` are kept.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

KEPT = 2000


class Events:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._events: deque[dict[str, Any]] = deque(maxlen=KEPT)
        self._seq = 0

    def emit(self, kind: str, **data: Any) -> None:
        with self._cond:
            self._seq += 1
            self._events.append({"seq": self._seq, "time": time.time(), "type": kind, **data})
            self._cond.notify_all()

    @property
    def last(self) -> int:
        with self._cond:
            return self._seq

    def after(self, seq: int, timeout: float = 0.0) -> list[dict[str, Any]]:
        """Events with a sequence number above ``seq``, waiting up to ``timeout`` s for one."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._seq <= seq:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)
            return [e for e in self._events if e["seq"] > seq]
