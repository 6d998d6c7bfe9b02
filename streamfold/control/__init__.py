"""Control a running query: pause, resume, breakpoints, inspection and live reconfiguration
(seed 002 Ch. 2–3: Texera and Fries), with a control log that makes them survive a crash.

    controller.py   the engine's seam (runtime/hooks.py) and the actions, one object per query
    pause.py        voluntary suspension at step boundaries; cancelling a long step to redo it
    breakpoints.py  conditions checked before each commit, evaluated by Spark
    inspect.py      read-only SQL over the answer, the states and the last batch
    reconfigure.py  a new query at a batch boundary: restate, or from now on
    log.py          the control log in the checkpoint, and its replay after a restart
    events.py       what happened, for pages that poll or stream
    server.py       the HTTP endpoint (FastAPI + uvicorn, 127.0.0.1, a token)
    client.py       ``streamfold control OUTPUT ACTION``'s side of it
    api.py          the Python API: a query with the same actions as methods

docs/control.md describes the actions, the two reconfiguration semantics and the guarantees.
"""

from __future__ import annotations

__all__ = ["ControlClient", "ControlledQuery", "Controller", "start"]


def __getattr__(name: str) -> object:  # imported on use: the endpoint's packages load only when needed
    if name in ("ControlledQuery", "start"):
        from . import api

        return getattr(api, name)
    if name == "Controller":
        from .controller import Controller

        return Controller
    if name == "ControlClient":
        from .client import ControlClient

        return ControlClient
    raise AttributeError(name)
