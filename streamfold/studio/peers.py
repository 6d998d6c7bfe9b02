"""A connected browser: a WebSocket with its own outgoing queue.

Messages to a peer are queued and written by one task per peer, so a slow browser delays
only itself, and two rooms broadcasting at once never interleave writes on one socket.
A peer whose queue overflows (it stopped reading) is disconnected rather than buffered without
bound; the page reconnects and receives the current state again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.websockets import WebSocket

QUEUE_LIMIT = 1000


FINISH_S = 5.0  # seconds a leaving peer's queued messages may take to go out


class Peer:
    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self._queue: asyncio.Queue[bytes | str | None] = asyncio.Queue()
        self._writer = asyncio.get_running_loop().create_task(self._write())
        self.closed = False

    def send(self, message: bytes | str) -> None:
        if self.closed:
            return
        if self._queue.qsize() >= QUEUE_LIMIT:
            self.close()
            return
        self._queue.put_nowait(message)

    def send_json(self, message: dict[str, Any]) -> None:
        self.send(json.dumps(message, default=str, allow_nan=False))

    async def _write(self) -> None:
        while True:
            message = await self._queue.get()
            if message is None:
                break
            try:
                if isinstance(message, bytes):
                    await self.ws.send_bytes(message)
                else:
                    await self.ws.send_text(message)
            except Exception:  # noqa: BLE001 - the socket closed under us; the reader sees it too
                self.closed = True
                break
        with contextlib.suppress(Exception):
            await self.ws.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)

    async def finish(self, timeout: float = FINISH_S) -> None:
        """Stop writing (after what is queued) and wait for the writer — a bounded time: a peer
        gone without closing its socket cannot hold up the others."""
        self.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer, timeout)
