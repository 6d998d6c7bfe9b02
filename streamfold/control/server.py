"""The control endpoint of a running query: JSON over HTTP on 127.0.0.1, with a token.

``streamfold run`` and :func:`streamfold.start` serve it on a free port of 127.0.0.1 (another
address only when asked explicitly) and write ``OUTPUT/_control.json`` (mode 0600) with the URL
and a random token; the file is removed when the query stops. Every request must carry the token
(``Authorization: Bearer TOKEN``, or ``?token=TOKEN`` for a browser's EventSource); without it
the answer is 401. The API, all JSON (docs/control.md has the details)::

    GET    /v1/status                     where the query is: state, batch, step, pause, breakpoint hit
    POST   /v1/pause        {wait, timeout}
    POST   /v1/resume
    POST   /v1/skip                       at a source breakpoint: quarantine its files, redo the batch
    GET    /v1/breakpoints
    POST   /v1/breakpoints  {kind, target, condition, after}
    DELETE /v1/breakpoints/{id}
    POST   /v1/inspect      {sql, limit}
    POST   /v1/reconfigure  {sql, semantics, wait, timeout}
    GET    /v1/history                    the control log
    GET    /v1/events?after=N&timeout=S   events after N (long poll)
    GET    /v1/events/stream?after=N      the same as server-sent events

Errors are ``{"error": {"code", "message", "hint", "params"}}``: 400 a bad request (unknown
kind, bad JSON, an inspect that is not a query), 401 no token, 404 an unknown action or
breakpoint, 409 an action that does not fit the query's state, 422 a query that does not
compile (reconfigure), 500 anything unexpected.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import socket
import threading
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from ..errors import ControlError, SqlError, StreamfoldError, UsageError
from ..runtime import files
from .client import CONTROL_FILE
from .controller import Controller

log = logging.getLogger("streamfold")
LOOPBACK = "127.0.0.1"


# -- the requests' JSON --------------------------------------------------------------------------
class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PauseBody(Body):
    wait: bool = True
    timeout: float = Field(default=30.0, ge=0, le=3600)


class BreakpointBody(Body):
    kind: str
    target: str | None = None
    condition: str | None = None
    after: int | None = None


class InspectBody(Body):
    sql: str
    limit: int = Field(default=100, ge=1, le=10_000)


class ReconfigureBody(Body):
    sql: str
    semantics: str = "restate"
    wait: bool = False
    timeout: float = Field(default=600.0, ge=0, le=86_400)


def error_body(code: str, message: str, hint: str | None = None, params: dict[str, Any] | None = None,
               **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "hint": hint, "params": params or {}, **extra}}


def error_status(e: StreamfoldError) -> int:
    if isinstance(e, ControlError):
        return e.status
    if isinstance(e, SqlError):
        return 422
    return 400


def make_app(controller: Controller, token: str) -> FastAPI:
    """The FastAPI application serving ``controller``."""
    app = FastAPI(title="streamfold control", docs_url=None, redoc_url=None, openapi_url=None)

    @app.middleware("http")
    async def require_token(request: Request, call_next: Any) -> Any:
        given = request.headers.get("authorization", "")
        given = given[7:] if given.lower().startswith("bearer ") else request.query_params.get("token", "")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return JSONResponse(error_body("UNAUTHORIZED", "this endpoint needs the query's token",
                                           "send Authorization: Bearer TOKEN, the token in OUTPUT/_control.json"),
                                status_code=401)
        return await call_next(request)

    @app.exception_handler(StreamfoldError)
    async def coded(request: Request, e: StreamfoldError) -> JSONResponse:
        extra = {"line": e.line, "column": e.column} if isinstance(e, SqlError) else {}
        return JSONResponse(error_body(e.code, e.message, e.hint, _jsonable(e.params), **extra),
                            status_code=error_status(e))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()]
        return JSONResponse(error_body("BAD_REQUEST", "the request is not valid: " + "; ".join(problems),
                                       "see docs/control.md for each action's JSON", {"problems": problems}),
                            status_code=400)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        if e.status_code == 404:
            return JSONResponse(error_body("UNKNOWN_ACTION", f"no action at {request.method} {request.url.path}",
                                           "the actions are under /v1/: status, pause, resume, skip, breakpoints, "
                                           "inspect, reconfigure, history, events"), status_code=404)
        if e.status_code == 405:
            return JSONResponse(error_body("METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.url.path}"),
                                status_code=405)
        return JSONResponse(error_body("BAD_REQUEST", str(e.detail)), status_code=e.status_code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, e: Exception) -> JSONResponse:
        log.exception("control endpoint: %s %s failed", request.method, request.url.path)
        return JSONResponse(error_body("INTERNAL", f"{type(e).__name__}: {e}"), status_code=500)

    @app.get("/v1/status")
    def status() -> Any:
        return controller.status()

    @app.post("/v1/pause")
    def pause(body: PauseBody | None = None) -> Any:
        body = body or PauseBody()
        return controller.pause(wait=body.wait, timeout=body.timeout)

    @app.post("/v1/resume")
    def resume() -> Any:
        return controller.resume()

    @app.post("/v1/skip")
    def skip() -> Any:
        return controller.skip()

    @app.get("/v1/breakpoints")
    def breakpoints() -> Any:
        return controller.list_breakpoints()

    @app.post("/v1/breakpoints")
    def add_breakpoint(body: BreakpointBody) -> Any:
        return controller.add_breakpoint(body.kind, body.target, body.condition, body.after)

    @app.delete("/v1/breakpoints/{bp_id}")
    def remove_breakpoint(bp_id: str) -> Any:
        return controller.remove_breakpoint(bp_id)

    @app.post("/v1/inspect")
    def inspect(body: InspectBody) -> Any:
        return controller.inspect(body.sql, body.limit)

    @app.post("/v1/reconfigure")
    def reconfigure(body: ReconfigureBody) -> Any:
        return controller.reconfigure(body.sql, body.semantics, wait=body.wait, timeout=body.timeout)

    @app.get("/v1/history")
    def history() -> Any:
        return controller.history()

    @app.get("/v1/events")
    def events(after: int = 0, timeout: float = 0.0) -> Any:
        return controller.events.after(after, min(max(timeout, 0.0), 60.0))

    @app.get("/v1/events/stream")
    async def stream(after: int = 0) -> Any:
        async def lines() -> Any:
            seq = after
            while not controller.gate.closed:
                batch = await asyncio.to_thread(controller.events.after, seq, 15.0)
                if not batch:
                    yield ": keep-alive\n\n"
                for e in batch:
                    seq = e["seq"]
                    yield f"id: {seq}\nevent: {e['type']}\ndata: {json.dumps(e, default=str)}\n\n"

        return StreamingResponse(lines(), media_type="text/event-stream")

    return app


class Endpoint:
    """The endpoint's server in a thread of its own, and its ``_control.json``."""

    def __init__(self, controller: Controller, output: str, host: str = LOOPBACK, port: int = 0) -> None:
        import uvicorn

        self.token = secrets.token_urlsafe(32)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            sock.close()
            raise UsageError(f"the control endpoint cannot listen on {host}:{port}: {e.strerror}",
                             code="CONTROL_BIND", params={"host": host, "port": port},
                             hint="choose another --control-port, or 0 for a free one") from None
        sock.listen(64)
        self.host, self.port = host, sock.getsockname()[1]
        self._fixed_port = port != 0
        if host not in (LOOPBACK, "::1", "localhost"):
            log.warning("the control endpoint listens on %s, beyond this machine (the token still guards it)", host)
        config = uvicorn.Config(make_app(controller, self.token), log_level="warning", access_log=False,
                                lifespan="off", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="streamfold-control", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        self._sock = sock
        self.path = os.path.join(os.path.abspath(output), CONTROL_FILE)
        bracketed = f"[{host}]" if family == socket.AF_INET6 else host
        self.url = f"http://{bracketed}:{self.port}"
        _write_private(self.path, {"url": self.url, "host": host, "port": self.port, "token": self.token,
                                   "pid": os.getpid(), "api": "v1",
                                   "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    def stop(self) -> None:
        """Stop serving and remove ``_control.json``. uvicorn notices ``should_exit`` on its next
        tick and then lets open connections finish (0.1–0.2 s; its shutdown closes the socket).
        A port chosen by the system is never asked for again, so that happens in the server's
        thread while the caller goes on; a port the user named is free when this returns, for a
        query started on it next."""
        self._server.should_exit = True
        if self._fixed_port:
            self._thread.join(timeout=5)
            self._sock.close()
        try:
            with open(self.path, encoding="utf-8") as fh:
                ours = json.load(fh).get("token") == self.token
        except (OSError, ValueError):
            ours = False
        if ours:
            files.remove(self.path)


def _write_private(path: str, data: dict[str, Any]) -> None:
    """Write JSON readable by the owner only (0600), atomically."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
