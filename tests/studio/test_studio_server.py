"""streamfold studio's server without a browser or Spark: the token on every endpoint, paths kept
inside the workspace, sources and their columns, the compiler cache, the shared text's protocol
(pycrdt peers standing in for browsers) and what persists across restarts."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pycrdt import Doc, Text, YMessageType, YSyncMessageType, create_sync_message, create_update_message, handle_sync_message
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from streamfold.errors import UsageError
from streamfold.studio import listen
from streamfold.studio.app import Studio, create_app
from streamfold.studio.compiler import compile_text, resolve_inputs
from streamfold.studio.workspace import Workspace

TOKEN = "t0ken-for-tests"


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    (root / "orders").mkdir(parents=True)
    pq.write_table(pa.table({"region": ["eu", "us"], "amount": [10, 20]}), root / "orders" / "0001.parquet")
    (root / "data" / "people").mkdir(parents=True)
    (root / "data" / "people" / "a.csv").write_text("name,age,score\nann,31,1.5\nbob,,2.0\n")
    (root / "empty").mkdir()
    (root / ".hidden").mkdir()
    (root / "_private").mkdir()
    return Workspace(str(root))


@pytest.fixture
def client(workspace):
    with TestClient(create_app(Studio(workspace, token=TOKEN))) as c:
        yield c


def auth(**extra):
    return {"params": {"token": TOKEN, **extra}}


def new_query(client, text="", name="q"):
    r = client.post("/api/queries", json={"name": name, "text": text}, headers={"X-Streamfold-Token": TOKEN})
    assert r.status_code == 200, r.text
    return r.json()["query"]["id"]


# -- safety --------------------------------------------------------------------------------------
def test_every_endpoint_refuses_a_request_without_the_token_or_with_a_wrong_one(client):
    qid = new_query(client, "SELECT * FROM orders")
    app = client.app
    checked = 0
    for route in app.routes:  # type: ignore[attr-defined]
        path = route.path.replace("{qid}", qid)
        if isinstance(route, WebSocketRoute):
            for params in ({}, {"token": "wrong"}):
                with pytest.raises(WebSocketDisconnect) as refused:
                    with client.websocket_connect(path, params=params):
                        pass
                assert refused.value.code == 1008
            checked += 1
        elif isinstance(route, (Route, Mount)):
            path = path + "/app.js" if isinstance(route, Mount) else path
            methods = sorted(getattr(route, "methods", None) or {"GET"})
            for method in methods:
                missing = client.request(method, path, json={})
                wrong = client.request(method, path, json={}, params={"token": "wrong"})
                assert (missing.status_code, missing.json()["error"]["code"]) == (401, "NO_TOKEN"), (method, path)
                assert (wrong.status_code, wrong.json()["error"]["code"]) == (403, "BAD_TOKEN"), (method, path)
            checked += 1
    assert checked >= 14  # every route the app declares, pages, assets, API and WebSockets


def test_the_token_is_taken_from_the_query_string_or_the_header_and_put_in_the_page(client):
    assert client.get("/api/queries", params={"token": TOKEN}).status_code == 200
    assert client.get("/api/queries", headers={"X-Streamfold-Token": TOKEN}).status_code == 200
    page = client.get("/", params={"token": TOKEN}).text
    assert f'content="{TOKEN}"' in page and f"/static/app.js?token={TOKEN}" in page
    assert client.get("/docs", params={"token": TOKEN}).status_code == 404  # no API browser


@pytest.mark.parametrize("path", ["../outside", "/etc", "orders/../../outside", ".studio/queries", "", "link", "."])
def test_binding_a_path_outside_the_workspace_is_refused(client, workspace, tmp_path, path):
    (tmp_path / "outside").mkdir(exist_ok=True)
    os.symlink(tmp_path / "outside", os.path.join(workspace.root, "link"))
    qid = new_query(client, "SELECT * FROM orders")
    r = client.put(f"/api/queries/{qid}/bindings", json={"bindings": [{"name": "t", "path": path}]}, **auth())
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "PATH_OUTSIDE_WORKSPACE"
    state = client.get(f"/api/queries/{qid}", **auth()).json()
    assert state["query"]["bindings"] == []


def test_unknown_queries_are_refused_on_http_and_websockets(client):
    assert client.get("/api/queries/nope-123", **auth()).json()["error"]["code"] == "UNKNOWN_QUERY"
    assert client.get("/api/queries/..%2F..%2Fetc", **auth()).status_code in (400, 404)
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect("/ws/events/nope-123", **auth()):
            pass


# -- sources and compiling -----------------------------------------------------------------------
def test_sources_are_the_workspace_directories_with_their_columns_read_without_spark(client):
    sources = {s["path"]: s for s in client.get("/api/sources", **auth()).json()["sources"]}
    assert set(sources) == {"orders", "data/people", "empty"}  # hidden and _ names skipped
    assert sources["orders"]["columns"] == [{"name": "region", "type": "STRING"}, {"name": "amount", "type": "BIGINT"}]
    assert sources["data/people"]["format"] == "csv"
    assert [(c["name"], c["type"]) for c in sources["data/people"]["columns"]] == [
        ("name", "STRING"), ("age", "BIGINT"), ("score", "DOUBLE")]
    assert sources["empty"]["format"] is None and sources["empty"]["columns"] == []


def test_a_compile_error_has_its_code_and_the_span_of_the_mistake(workspace):
    text = "SELECT region, sum(amont) FROM orders GROUP BY region"
    result = compile_text(text, resolve_inputs(workspace, []))
    err = result["error"]
    assert not result["ok"] and err["code"] == "UNKNOWN_COLUMN"
    assert text[err["span"][0]:err["span"][1]] == "amont"
    assert (err["line"], err["column"]) == (1, text.index("amont") + 1)


def test_an_unknown_table_gets_the_studios_hint_and_an_empty_directory_says_why(workspace):
    unknown = compile_text("SELECT * FROM sales", resolve_inputs(workspace, []))["error"]
    assert unknown["code"] == "UNKNOWN_TABLE" and "bind a directory as sales" in unknown["hint"]
    empty = compile_text("SELECT * FROM empty", resolve_inputs(workspace, []))["error"]
    assert empty["code"] == "UNKNOWN_TABLE" and "no files yet" in empty["hint"]


def test_a_compiled_query_gives_its_plan_graph_and_the_inputs_it_reads(workspace):
    result = compile_text("SELECT region, sum(amount) AS total FROM orders GROUP BY region",
                          resolve_inputs(workspace, []))
    assert result["ok"] and [i["path"] for i in result["inputs"]] == ["orders"]
    kinds = {n["id"]: n["kind"] for n in result["graph"]["nodes"]}
    assert kinds["source:orders"] == "source" and kinds["answer"] == "answer"
    states = [n for n, k in kinds.items() if k == "state"]
    assert states and all({"from": f"step:{s[6:]}", "to": s, "kind": "merge"} in result["graph"]["edges"]
                          for s in states)


def test_an_explicit_binding_renames_a_directory_and_can_make_it_a_static_table(client):
    qid = new_query(client, "SELECT p.name, o.amount FROM people p JOIN o ON true")
    r = client.put(f"/api/queries/{qid}/bindings", **auth(),
                   json={"bindings": [{"name": "o", "path": "orders", "static": True}], "actor": "ann"})
    compiled = r.json()["compile"]
    assert compiled["ok"], compiled["error"]
    assert {i["name"]: (i["path"], i["static"]) for i in compiled["inputs"]} == {
        "o": ("orders", True), "people": ("data/people", False)}


def test_the_server_compiles_each_distinct_text_once_whoever_asks(client):
    text = "SELECT region, count(*) AS n FROM orders GROUP BY region"
    a, b = new_query(client, text, "a"), new_query(client, text, "b")
    before = client.get("/api/stats", **auth()).json()
    for qid in (a, b, a):
        assert client.get(f"/api/queries/{qid}", **auth()).json()["compile"]["ok"]
        client.post(f"/api/queries/{qid}/compile", **auth())
    after = client.get("/api/stats", **auth()).json()
    assert after["compiles"] - before["compiles"] == 1
    assert after["cache_hits"] - before["cache_hits"] >= 3


def test_running_a_query_that_does_not_compile_is_refused_with_its_error_and_logged(client):
    qid = new_query(client, "SELECT nope FROM orders")
    r = client.post(f"/api/queries/{qid}/run", json={"actor": "ann"}, **auth())
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "QUERY_DOES_NOT_COMPILE"
    assert r.json()["error"]["params"] == {"error": "UNKNOWN_COLUMN"}
    log = client.get(f"/api/queries/{qid}", **auth()).json()["log"]
    assert log[-1]["actor"] == "ann" and log[-1]["error"]["code"] == "UNKNOWN_COLUMN"
    assert client.post(f"/api/queries/{qid}/stop", json={}, **auth()).json()["error"]["code"] == "NOT_RUNNING"


# -- the shared text -----------------------------------------------------------------------------
class YPeer:
    """A pycrdt document speaking the y-websocket protocol, as a browser's provider does."""

    def __init__(self, client, qid):
        self.doc = Doc()
        self.text = self.doc.get("sql", type=Text)
        self.ws = client.websocket_connect(f"/ws/doc/{qid}", **auth()).__enter__()
        self.handle(self.ws.receive_bytes())  # the server's step 1 → our step 2
        self.ws.send_bytes(create_sync_message(self.doc))
        self.handle(self.ws.receive_bytes())  # its step 2: the whole text

    def handle(self, message):
        assert message[0] == YMessageType.SYNC
        reply = handle_sync_message(message[1:], self.doc)
        if reply is not None:
            self.ws.send_bytes(reply)
        return message[1]

    def edit(self, index, text):
        before = self.doc.get_state()
        self.text.insert(index, text)
        self.ws.send_bytes(create_update_message(self.doc.get_update(before)))

    def receive_update(self):
        assert self.handle(self.ws.receive_bytes()) == YSyncMessageType.SYNC_UPDATE

    def close(self):
        self.ws.__exit__(None, None, None)


def test_peers_editing_at_once_converge_and_a_late_joiner_receives_the_text(client):
    qid = new_query(client, "SELECT * FROM orders")
    a, b = YPeer(client, qid), YPeer(client, qid)
    assert str(a.text) == str(b.text) == "SELECT * FROM orders"
    a.edit(0, "-- by a\n")  # both edit before seeing the other's edit
    b.edit(len(str(b.text)), " WHERE amount > 1")
    b.receive_update()
    a.receive_update()
    assert str(a.text) == str(b.text) == "-- by a\nSELECT * FROM orders WHERE amount > 1"
    late = YPeer(client, qid)
    assert str(late.text) == str(a.text)
    for peer in (a, b, late):
        peer.close()


def test_every_viewer_gets_the_state_then_each_change_once(client):
    qid = new_query(client, "SELECT * FROM orders")
    with client.websocket_connect(f"/ws/events/{qid}", **auth(name="ann")) as ann:
        state = ann.receive_json()
        assert state["type"] == "state" and state["compile"]["ok"] and state["run"]["status"] == "idle"
        assert viewers_of(ann) == {"type": "viewers", "viewers": ["ann"], "colors": {"ann": 0}}
        peer = YPeer(client, qid)
        peer.edit(len(str(peer.text)), " WHERE amont > 1")
        compiled = next_of(ann, "compile")
        assert compiled["compile"]["error"]["code"] == "UNKNOWN_COLUMN"
        with client.websocket_connect(f"/ws/events/{qid}", **auth(name="bob")) as bob:
            joined = bob.receive_json()  # a late joiner: the current state, this compile included
            assert joined["compile"]["text"] == "SELECT * FROM orders WHERE amont > 1"
            assert viewers_of(ann) == {"type": "viewers", "viewers": ["ann", "bob"], "colors": {"ann": 0, "bob": 1}}
        # bob left: the next viewer takes his seat, and ann keeps hers
        assert viewers_of(ann)["colors"] == {"ann": 0}
        with client.websocket_connect(f"/ws/events/{qid}", **auth(name="cy")) as cy:
            assert viewers_of(cy)["colors"] == {"ann": 0, "cy": 1}
        peer.close()


def viewers_of(ws) -> dict:
    """The next viewers message on an event channel (a log entry or a compile may come first)."""
    return next_of(ws, "viewers")


def next_of(ws, kind: str) -> dict:
    """The next message of ``kind`` on an event channel: others (a log entry, the sources'
    refresh, a waiting count) may come between, in any order."""
    while True:
        msg = ws.receive_json()
        if msg["type"] == kind:
            return msg


def test_control_actions_need_a_running_query_and_bad_ones_are_refused_with_a_code(client):
    qid = new_query(client, "SELECT * FROM orders")
    assert client.get(f"/api/queries/{qid}", **auth()).json()["control"] is None  # nothing runs: nothing to control
    for path, body in (("pause", {}), ("resume", {}), ("skip", {}), ("inspect", {"sql": "SELECT 1"}),
                       ("reconfigure", {}), ("breakpoints", {"kind": "after", "after": 1})):
        r = client.post(f"/api/queries/{qid}/{path}", json={"actor": "ann", **body}, **auth())
        assert (r.status_code, r.json()["error"]["code"]) == (409, "NOT_RUNNING"), path
    r = client.delete(f"/api/queries/{qid}/breakpoints/b1", **auth(actor="ann"))
    assert (r.status_code, r.json()["error"]["code"]) == (409, "NOT_RUNNING")
    for path, body in (("inspect", {"sql": "SELECT 1", "limit": 0}), ("breakpoints", {"kind": "after", "after": "x"}),
                       ("reconfigure", {"sql": 42})):
        r = client.post(f"/api/queries/{qid}/{path}", json=body, **auth())
        assert (r.status_code, r.json()["error"]["code"]) == (400, "BAD_REQUEST"), path


def test_the_text_bindings_and_log_survive_a_restart_of_the_studio(workspace):
    with TestClient(create_app(Studio(workspace, token=TOKEN))) as first:
        qid = new_query(first, "SELECT * FROM orders")
        peer = YPeer(first, qid)
        peer.edit(0, "-- kept\n")
        first.put(f"/api/queries/{qid}/bindings", **auth(),
                  json={"bindings": [{"name": "orders", "path": "orders"}], "actor": "ann"})
        peer.close()
    with TestClient(create_app(Studio(workspace, token=TOKEN))) as second:
        state = second.get(f"/api/queries/{qid}", **auth()).json()
        assert state["compile"]["text"] == "-- kept\nSELECT * FROM orders"
        assert state["query"]["bindings"] == [{"name": "orders", "path": "orders", "format": None, "static": False}]
        assert [e["action"] for e in state["log"]] == ["bind"]
        again = YPeer(second, qid)
        assert str(again.text) == "-- kept\nSELECT * FROM orders"
        again.close()
    with open(os.path.join(workspace.query_dir(qid), "query.sql"), encoding="utf-8") as fh:
        assert fh.read() == "-- kept\nSELECT * FROM orders"
    assert json.loads(open(os.path.join(workspace.query_dir(qid), "query.json")).read())["id"] == qid


# -- a run, on Spark -----------------------------------------------------------------------------
@pytest.mark.spark
def test_a_run_that_meets_a_bad_file_fails_with_its_coded_error_in_the_shared_state(workspace, spark):
    import time

    studio = Studio(workspace, token=TOKEN, spark=spark)
    with TestClient(create_app(studio)) as client:
        qid = new_query(client, "SELECT region, sum(amount) AS total FROM orders GROUP BY region")

        def status_after(batch: int) -> dict:
            deadline = time.monotonic() + 180
            while True:
                run = client.get(f"/api/queries/{qid}", **auth()).json()["run"]
                if run["status"] == "failed" or run["last_batch"] >= batch:
                    return run
                assert time.monotonic() < deadline, run
                time.sleep(0.2)

        assert client.post(f"/api/queries/{qid}/run", json={"actor": "ann"}, **auth()).json()["run"]["run"] == 1
        assert status_after(0)["status"] == "running"
        page = client.get(f"/api/queries/{qid}/answer", **auth()).json()
        assert {r[0]: r[1] for r in page["rows"]} == {"eu": 10, "us": 20}
        with open(os.path.join(workspace.root, "orders", "0002.parquet"), "wb") as fh:
            fh.write(b"not parquet")
        run = status_after(1)
        assert run["status"] == "failed" and run["last_batch"] == 0
        assert run["error"]["code"] == "UNREADABLE_FILE" and "0002.parquet" in run["error"]["message"]
        state = client.get(f"/api/queries/{qid}", **auth()).json()
        assert [(e["actor"], e["level"]) for e in state["log"]][-2:] == [("ann", "info"), ("streamfold", "error")]
        assert [c["batch"] for c in state["timeline"]] == [0]


@pytest.mark.spark
def test_streamfold_control_on_a_studio_run_is_shown_to_every_viewer_and_a_stopped_pause_comes_back(
        workspace, spark):
    """The page and ``streamfold control`` drive the same controller: a pause through the run's
    own endpoint reaches every viewer as the query's control state, and the log says so; a run
    stopped while paused and run again comes back paused (its control log replayed)."""
    import time

    from streamfold.control.client import ControlClient

    studio = Studio(workspace, token=TOKEN, spark=spark)
    with TestClient(create_app(studio)) as client:
        qid = new_query(client, "SELECT region, sum(amount) AS total FROM orders GROUP BY region")
        client.post(f"/api/queries/{qid}/run", json={"actor": "ann"}, **auth())
        with client.websocket_connect(f"/ws/events/{qid}", **auth(name="ann")) as ann:
            assert ann.receive_json()["control"]["state"] in ("running", "idle")
            ControlClient(studio.session(qid).results.output).pause()
            deadline = time.monotonic() + 60
            while True:
                msg = ann.receive_json()
                if msg["type"] == "control" and msg["control"]["state"] == "paused":
                    break
                assert time.monotonic() < deadline, msg
        state = client.get(f"/api/queries/{qid}", **auth()).json()  # a late joiner sees it paused
        assert state["control"]["state"] == "paused" and state["control"]["pause"]["reason"] == "pause"
        assert any(e["action"] == "paused" and e["actor"] == "streamfold" for e in state["log"])
        r = client.post(f"/api/queries/{qid}/resume", json={"actor": "bob"}, **auth())
        assert r.status_code == 200 and r.json()["control"]["state"] in ("running", "idle")
        r = client.post(f"/api/queries/{qid}/resume", json={"actor": "bob"}, **auth())
        assert (r.status_code, r.json()["error"]["code"]) == (409, "NOT_PAUSED")
        # Stopped while paused, then run again: the same run, its control log replayed.
        assert client.post(f"/api/queries/{qid}/pause", json={"actor": "bob"}, **auth()).status_code == 200
        stopped = client.post(f"/api/queries/{qid}/stop", json={"actor": "bob"}, **auth()).json()["run"]
        assert stopped["status"] == "stopped" and client.get(f"/api/queries/{qid}", **auth()).json()["control"] is None
        assert client.post(f"/api/queries/{qid}/run", json={"actor": "ann"}, **auth()).json()["run"]["run"] == 1
        again = client.get(f"/api/queries/{qid}", **auth()).json()["control"]
        assert again["state"] == "paused" and again["pause"]["reason"] == "restored"  # it comes back paused


# -- the command ---------------------------------------------------------------------------------
def test_streamfold_studio_listens_on_loopback_prints_its_url_with_the_token_and_stops_on_ctrl_c(workspace):
    import re
    import signal
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "streamfold", "studio", "--workspace", workspace.root,
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]  # type: ignore[union-attr]
        url = re.search(r"open (http://127\.0\.0\.1:(\d+)/\?token=(\S+))", lines[1])
        assert url, lines
        port = int(url.group(2))
        with urllib.request.urlopen(url.group(1), timeout=30) as r:  # listening before it printed
            assert r.status == 200 and url.group(3) in r.read().decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/queries", timeout=5)
        assert refused.value.code == 401
        with pytest.raises(UsageError) as busy:
            listen("127.0.0.1", port)
        assert busy.value.code == "PORT_IN_USE"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130  # as `streamfold run` exits when interrupted
    assert "interrupted" in proc.stderr.read()  # type: ignore[union-attr]


def test_studio_sinks_stay_inside_the_workspace(workspace):
    """``streamfold studio --sink``: a Delta table's path is the workspace's; one outside is
    refused, as a source would be."""
    from streamfold.errors import UsageError

    studio = Studio(workspace, token=TOKEN, sinks=["answers/totals:delta"])
    assert studio.sinks == (os.path.join(workspace.root, "answers", "totals") + ":delta",)
    for outside in ("../elsewhere:delta", "/tmp/totals:delta"):
        with pytest.raises(UsageError) as e:
            Studio(workspace, token=TOKEN, sinks=[outside])
        assert e.value.code == "PATH_OUTSIDE_WORKSPACE"


@pytest.mark.spark
def test_a_studio_run_delivers_to_its_sinks_and_every_viewer_sees_what_each_holds(workspace, spark):
    """A run of a studio started with a Delta sink delivers each batch; the control state every
    viewer gets names the sink and the last batch it holds; the table equals the answer."""
    import time

    from tests.sinks.oracle import delta_rows

    studio = Studio(workspace, token=TOKEN, spark=spark, sinks=["answers/totals:delta"])
    with TestClient(create_app(studio)) as client:
        qid = new_query(client, "SELECT region, sum(amount) AS total FROM orders GROUP BY region")
        client.post(f"/api/queries/{qid}/run", json={"actor": "ann"}, **auth())
        deadline = time.monotonic() + 180
        while True:
            control = client.get(f"/api/queries/{qid}", **auth()).json().get("control") or {}
            sinks = control.get("sinks") or []
            if sinks and sinks[0]["delivered"] >= 0:
                break
            assert time.monotonic() < deadline, control
            time.sleep(0.2)
        assert "answers/totals" in sinks[0]["sink"] and not sinks[0]["failing"], sinks
        assert sorted(delta_rows(os.path.join(workspace.root, "answers", "totals"))) == [("eu", 10), ("us", 20)]
        client.post(f"/api/queries/{qid}/stop", json={"actor": "ann"}, **auth())
