"""The studio's web server: an ASGI app (FastAPI on uvicorn) behind a token.

Routes (every one, pages, assets, API and WebSockets alike, refused without the token)::

    GET  /                                  the page (its asset links carry the token)
    GET  /static/…                          the built front end
    GET  /api/sources                       the workspace's source directories and columns
    GET  /api/queries       POST /api/queries {name, text}
    GET  /api/queries/{id}                  the shared state (as a joining viewer gets it)
    PUT  /api/queries/{id}/bindings         {bindings: [{name, path, format, static}], actor}
    POST /api/queries/{id}/compile          compile now (e.g. after new source files)
    POST /api/queries/{id}/run | /stop      {actor}
    POST /api/queries/{id}/pause | /resume | /skip      {actor}: control the running query
    POST /api/queries/{id}/breakpoints      {actor, kind, target, condition, after}
    DELETE /api/queries/{id}/breakpoints/{bp}?actor=
    POST /api/queries/{id}/inspect          {actor, sql, limit}: read-only SQL, answered to the asker
    POST /api/queries/{id}/reconfigure      {actor, semantics, sql}: the shared text unless sql is given
    GET  /api/queries/{id}/answer           ?batch&sort&desc&offset&limit: a page of a snapshot
    GET  /api/queries/{id}/changes          ?batch: the rows a batch changed
    GET  /api/queries/{id}/series           ?value&label&labels&from: a column over batches
    GET  /api/stats                         the compiler cache's counts
    WS   /ws/doc/{id}                       the shared text (y-websocket protocol)
    WS   /ws/events/{id}?name=              the shared state, then its deltas

**Safety**: the token is a random 32-byte value compared in constant time, taken from the
``token`` query parameter or the ``X-Streamfold-Token`` header — never from a cookie, so another
site the browser visits cannot make requests with it. Paths in requests are resolved by
:meth:`Workspace.resolve`, which refuses anything outside the workspace. Inspect is the
controller's: one query over the run's tables, anything that writes refused with a coded error.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from ..errors import ControlError, StreamfoldError, UsageError
from .compiler import CompileCache
from .session import QuerySession
from .workspace import Binding, Workspace

STATIC = os.path.join(os.path.dirname(__file__), "static")
TOKEN_HEADER = "x-streamfold-token"


class Studio:
    """Everything the server shares: the workspace, the compiler cache, the Spark session runs
    use (None: streamfold's own, on ``master``), and the sessions of the queries opened so far."""

    def __init__(self, workspace: Workspace, token: str | None = None, spark: Any = None,
                 master: str | None = None, sinks: Sequence[str] = ()) -> None:
        self.workspace = workspace
        self.token = token or secrets.token_urlsafe(32)
        self.spark = spark
        self.master = master
        self.sinks = studio_sinks(workspace, sinks)
        self.compiler = CompileCache()
        self.sessions: dict[str, QuerySession] = {}

    def session(self, qid: str) -> QuerySession:
        hit = self.sessions.get(qid)
        if hit is None:
            self.workspace.query_dir(qid)  # refuses unknown ids
            hit = self.sessions[qid] = QuerySession(self, qid)
        return hit

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.sessions.values()))


def studio_sinks(workspace: Workspace, specs: Sequence[str]) -> tuple[str, ...]:
    """The sinks every run of the studio delivers to (``streamfold studio --sink``), checked now:
    a Delta table's path is relative to the workspace and stays inside it; a PostgreSQL URL
    names its table (its password comes from the studio's environment, never the URL)."""
    from ..connectors import Endpoint
    from ..connectors.sinks import check_sink

    out = []
    for spec in specs:
        endpoint = check_sink(spec)
        assert isinstance(endpoint, Endpoint)
        if endpoint.kind == "delta":
            out.append(workspace.resolve(endpoint.location, directory=False) + ":delta")
        else:
            out.append(spec)
    return tuple(out)


class TokenGuard:
    """ASGI middleware: an HTTP request or WebSocket without the studio's token is refused
    (401 when none is given, 403 when it is wrong; a WebSocket is closed before it opens)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0].encode()
        for name, value in scope.get("headers", []):
            if name.decode("latin-1").lower() == TOKEN_HEADER:
                given = value
        if given and secrets.compare_digest(given, self.token):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await WebSocketClose(code=1008)(scope, receive, send)
            return
        status = 403 if given else 401
        response = JSONResponse({"error": {"code": "BAD_TOKEN" if given else "NO_TOKEN",
                                           "message": "this studio needs the token from the URL it printed"}},
                                status_code=status)
        await response(scope, receive, send)


def create_app(studio: Studio) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await studio.close()

    app = FastAPI(title="streamfold studio", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.add_middleware(TokenGuard, token=studio.token)
    app.mount("/static", StaticFiles(directory=STATIC, check_dir=False), name="static")

    @app.exception_handler(StreamfoldError)
    async def coded(_: Request, e: StreamfoldError) -> JSONResponse:
        status = 404 if e.code in ("UNKNOWN_QUERY",) else 409 if e.code in ("RUN_ACTIVE", "NOT_RUNNING") else 400
        if isinstance(e, ControlError):
            status = e.status
        return JSONResponse({"error": {"code": e.code, "message": e.message, "hint": e.hint,
                                       "params": json.loads(json.dumps(e.params, default=str))}},
                            status_code=status)

    @app.get("/", response_class=HTMLResponse)
    async def index() -> HTMLResponse:
        with open(os.path.join(STATIC, "index.html"), encoding="utf-8") as fh:
            page = fh.read()
        if not os.path.isfile(os.path.join(STATIC, "app.js")):
            page = page.replace("<!--missing-->", "<p class='missing'>The page's script is not built: run "
                                                   "<code>make setup</code> in the streamfold checkout.</p>")
        return HTMLResponse(page.replace("__TOKEN__", studio.token))

    @app.get("/api/sources")
    async def sources() -> dict[str, Any]:
        found = await asyncio.to_thread(studio.workspace.sources.scan)
        return {"root": studio.workspace.root, "sources": [s.to_json() for s in found]}

    @app.get("/api/queries")
    async def queries() -> dict[str, Any]:
        return {"queries": [m.to_json() for m in await asyncio.to_thread(studio.workspace.queries)]}

    @app.post("/api/queries")
    async def create(body: dict[str, Any]) -> dict[str, Any]:
        meta = await asyncio.to_thread(studio.workspace.create_query, str(body.get("name", "query")),
                                       str(body.get("text", "")))
        return {"query": meta.to_json()}

    @app.get("/api/queries/{qid}")
    async def query(qid: str) -> dict[str, Any]:
        s = studio.session(qid)
        if s.compiled is None:
            await s.compile()
        return s.state()

    @app.put("/api/queries/{qid}/bindings")
    async def bind(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        items = body.get("bindings")
        if not isinstance(items, list):
            raise UsageError("give the bindings as a list", code="BAD_REQUEST", hint='{"bindings": [...]}')
        bindings = [Binding.from_json(b if isinstance(b, dict) else {}) for b in items]
        s = studio.session(qid)
        await s.set_bindings(bindings, _actor(body))
        return {"query": s.meta.to_json(), "compile": s.compiled}

    @app.post("/api/queries/{qid}/compile")
    async def compile_now(qid: str) -> dict[str, Any]:
        return {"compile": await studio.session(qid).compile()}

    @app.post("/api/queries/{qid}/run")
    async def run(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        s = studio.session(qid)
        await s.start_run(_actor(body))
        return {"run": s.run.to_json()}

    @app.post("/api/queries/{qid}/stop")
    async def stop(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        s = studio.session(qid)
        await s.stop_run(_actor(body))
        return {"run": s.run.to_json()}

    # -- control: the running query's controller (every viewer sees its status change) --------
    @app.post("/api/queries/{qid}/pause")
    async def pause(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"control": await studio.session(qid).control_action(_actor(body), "pause", wait=True, timeout=30.0)}

    @app.post("/api/queries/{qid}/resume")
    async def resume(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"control": await studio.session(qid).control_action(_actor(body), "resume")}

    @app.post("/api/queries/{qid}/skip")
    async def skip(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"control": await studio.session(qid).control_action(_actor(body), "skip")}

    @app.post("/api/queries/{qid}/breakpoints")
    async def add_breakpoint(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        after = body.get("after")
        if after is not None and not isinstance(after, int):
            raise UsageError("after must be a whole number of batches", code="BAD_REQUEST", params={"after": after})
        args = {"kind": str(body.get("kind") or ""), "target": _text(body, "target"),
                "condition": _text(body, "condition"), "after": after}
        return {"breakpoint": await studio.session(qid).control_action(_actor(body), "add_breakpoint", **args)}

    @app.delete("/api/queries/{qid}/breakpoints/{bp}")
    async def remove_breakpoint(qid: str, bp: str, actor: str = "someone") -> dict[str, Any]:
        return {"breakpoint": await studio.session(qid).control_action(actor[:40], "remove_breakpoint", bp_id=bp)}

    @app.post("/api/queries/{qid}/inspect")
    async def inspect(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        sql, limit = _text(body, "sql") or "", body.get("limit", 100)
        if not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise UsageError("limit must be a number of rows from 1 to 1000", code="BAD_REQUEST",
                             params={"limit": limit})
        return await studio.session(qid).control_action(_actor(body), "inspect", sql=sql, limit=limit)

    @app.post("/api/queries/{qid}/reconfigure")
    async def reconfigure(qid: str, body: dict[str, Any]) -> dict[str, Any]:
        s = studio.session(qid)
        sql = _text(body, "sql") or s.room.value
        return {"reconfiguration": await s.control_action(_actor(body), "reconfigure", sql=sql,
                                                          semantics=_text(body, "semantics"))}

    @app.get("/api/queries/{qid}/answer")
    async def answer(qid: str, batch: int | None = None, sort: str | None = None, desc: bool = False,
                     offset: int = 0, limit: int = 50) -> dict[str, Any]:
        results = studio.session(qid).results
        if results is None:
            return {"batch": -1, "columns": [], "types": [], "rows": [], "total": 0, "offset": 0}
        return await asyncio.to_thread(results.page, batch, sort, desc, offset, limit)

    @app.get("/api/queries/{qid}/changes")
    async def changes(qid: str, batch: int) -> dict[str, Any]:
        results = _results(studio, qid)
        return await asyncio.to_thread(results.changes, batch)

    @app.get("/api/queries/{qid}/series")
    async def series(qid: str, value: str, label: str | None = None, labels: str = "[]",
                     first: int = 0) -> dict[str, Any]:
        try:
            chosen = json.loads(labels)
        except json.JSONDecodeError:
            chosen = None
        if not isinstance(chosen, list):
            raise UsageError("labels must be a JSON list", code="BAD_REQUEST", params={"labels": labels})
        results = _results(studio, qid)
        return await asyncio.to_thread(results.series, value, label, chosen, first)

    @app.get("/api/stats")
    async def stats() -> dict[str, Any]:
        return {"compiles": studio.compiler.stats.compiles, "cache_hits": studio.compiler.stats.hits,
                "sessions": len(studio.sessions)}

    async def opened(ws: WebSocket, qid: str) -> QuerySession | None:
        """The session a WebSocket asks for, once accepted; None (closed) for an unknown query."""
        try:
            s = studio.session(qid)
        except StreamfoldError:
            await ws.close(code=1008)
            return None
        await ws.accept()
        return s

    @app.websocket("/ws/doc/{qid}")
    async def doc(ws: WebSocket, qid: str) -> None:
        if (s := await opened(ws, qid)) is not None:
            await s.room.serve(ws)

    @app.websocket("/ws/events/{qid}")
    async def events(ws: WebSocket, qid: str, name: str = "someone") -> None:
        if (s := await opened(ws, qid)) is not None:
            await s.serve_events(ws, name[:40])

    return app


def _results(studio: Studio, qid: str) -> Any:
    results = studio.session(qid).results
    if results is None:
        raise UsageError("the query has not run yet", code="NO_BATCH", hint="run it first")
    return results


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise UsageError(f"{key} must be text", code="BAD_REQUEST", params={key: value})
    return value


def _actor(body: dict[str, Any]) -> str:
    return str(body.get("actor") or "someone")[:40]
