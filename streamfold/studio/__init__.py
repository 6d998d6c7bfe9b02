"""streamfold studio: a local web page to write, explain, run and watch queries, several
people at once (seed 002, Texera's UI).

``streamfold studio --workspace DIR`` serves it on 127.0.0.1 with a random token in the URL it
prints. The modules, from the outside in:

* ``app`` — the ASGI app (FastAPI): routes, the token guard, the static front end;
* ``session`` — one query's shared state (text, compile result, run, timeline, log) and its viewers;
* ``collab`` — the shared text: a Yjs document on pycrdt, the y-websocket protocol;
* ``compiler`` — compiling the text once per distinct text, with the plan's ``graph``;
* ``driver`` — starting and stopping runs through ``streamfold.start``'s Query;
* ``results`` — reading a run's output (commits, changes, snapshot pages, series) with pyarrow;
* ``workspace`` and ``sources`` — the directory tree: sources, queries, runs, logs.

The page itself is built from ``web/`` (CodeMirror 6, Yjs) by ``make setup``.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

__all__ = ["listen", "serve"]


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: a free one), or ``PORT_IN_USE``. It listens
    before the server starts, so the URL works as soon as it is printed (connections wait)."""
    from ..errors import UsageError

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}", code="PORT_IN_USE",
                         params={"host": host, "port": port}, hint="choose another --port (0 picks a free one)") from None
    return sock


def serve(workspace: str, port: int = 8765, host: str = "127.0.0.1", master: str | None = None,
          token: str | None = None, out: Any = None, sinks: Any = ()) -> None:
    """Serve the studio until interrupted, printing its URL (with the token) first."""
    import uvicorn

    from .app import Studio, create_app
    from .workspace import Workspace

    out = out or sys.stdout
    studio = Studio(Workspace(workspace), token=token, master=master, sinks=sinks)
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"streamfold studio: workspace {studio.workspace.root}", file=out)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {host}, not only this machine; anyone with the token can use it", file=out)
    print(f"open http://{shown}:{bound}/?token={studio.token}", file=out, flush=True)
    config = uvicorn.Config(create_app(studio), log_level="warning", ws_max_size=16 * 1024 * 1024)
    uvicorn.Server(config).run(sockets=[sock])
