"""The control endpoint: loopback only, a token, coded errors; ``streamfold control`` over it."""

from __future__ import annotations

import json
import os
import stat
import urllib.error
import urllib.request

import pytest

import streamfold
from streamfold.cli import main

from ..controlled import Feed, check_every_commit

pytestmark = pytest.mark.spark

SQL = "SELECT k, sum(v) AS s FROM S GROUP BY k"


@pytest.fixture(scope="module")
def running(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("http")
    feed = Feed(str(root / "S"))
    feed.put([(1, 5), (2, 6)])
    out = str(root / "out")
    q = streamfold.start(SQL, {"S": feed.directory}, out, spark=spark, trigger=0.1, partitions=2)
    q.wait_for_batch(0, timeout=180)
    yield q, feed, out
    q.stop()


def request(url: str, method: str = "GET", body: bytes | None = None, token: str | None = None,
            query: str = "") -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url + query, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def control_file(out: str) -> dict:
    return json.load(open(os.path.join(out, "_control.json")))


def test_the_endpoint_listens_on_loopback_and_its_token_is_readable_by_the_owner_only(running):
    q, _, out = running
    info = control_file(out)
    assert info["host"] == "127.0.0.1" and info["url"] == f"http://127.0.0.1:{info['port']}" == q.control_url
    assert stat.S_IMODE(os.stat(os.path.join(out, "_control.json")).st_mode) == 0o600
    assert len(info["token"]) >= 32


def test_requests_without_the_token_are_refused(running):
    _, _, out = running
    url = control_file(out)["url"]
    for token in (None, "wrong"):
        for method, path in (("GET", "/v1/status"), ("POST", "/v1/pause"), ("GET", "/v1/nothing")):
            code, body = request(url + path, method, token=token)
            assert code == 401 and body["error"]["code"] == "UNAUTHORIZED", (token, path)
    assert request(url + "/v1/status", query="?token=" + control_file(out)["token"])[0] == 200


def test_unknown_actions_and_bad_requests_get_coded_errors(running):
    _, _, out = running
    info = control_file(out)
    url, token = info["url"], info["token"]
    code, body = request(url + "/v1/launch", "POST", token=token)
    assert code == 404 and body["error"]["code"] == "UNKNOWN_ACTION"
    code, body = request(url + "/v1/inspect", "POST", b"{not json", token=token)
    assert code == 400 and body["error"]["code"] == "BAD_REQUEST"
    code, body = request(url + "/v1/inspect", "POST", json.dumps({"sql": "SELECT 1", "rows": 3}).encode(), token=token)
    assert code == 400 and body["error"]["code"] == "BAD_REQUEST"
    code, body = request(url + "/v1/breakpoints", "POST", json.dumps({"kind": "whenever"}).encode(), token=token)
    assert code == 400 and body["error"]["code"] == "BREAKPOINT_BAD_KIND"
    code, body = request(url + "/v1/inspect", "POST", json.dumps({"sql": "DROP TABLE agg"}).encode(), token=token)
    assert code == 400 and body["error"]["code"] == "INSPECT_NOT_A_QUERY"
    code, body = request(url + "/v1/resume", "POST", token=token)
    assert code == 409 and body["error"]["code"] == "NOT_PAUSED"
    bad = json.dumps({"sql": "SELECT k, sum(nope) FROM S GROUP BY k"}).encode()
    code, body = request(url + "/v1/reconfigure", "POST", bad, token=token)
    assert code == 422 and body["error"]["code"] == "UNKNOWN_COLUMN" and body["error"]["line"] == 1
    code, body = request(url + "/v1/status", token=token)
    assert code == 200 and body["query"]["version"] == 1 and body["state"] in ("idle", "running")


def test_streamfold_control_pauses_inspects_reconfigures_and_resumes_a_running_query(running, capsys):
    q, feed, out = running
    assert main(["control", out, "pause"]) == 0
    assert capsys.readouterr().out.startswith("paused at batch")
    feed.put([(1, 1)])
    assert main(["control", out, "inspect", "SELECT k, s FROM snapshot ORDER BY k"]) == 0
    shown = capsys.readouterr().out
    assert "k  s" in shown and "1  5" in shown and "2  6" in shown
    assert main(["control", out, "reconfigure", f"{SQL} HAVING sum(v) > 5"]) == 0
    assert "keeps agg" in capsys.readouterr().out
    assert main(["control", out, "--json", "status"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["state"] == "paused" and status["reconfiguration"]["version"] == 2
    seen = q.events()[-1]["seq"]
    assert main(["control", out, "resume"]) == 0
    q.wait_for_batch(1, timeout=180)
    assert any(e["type"] == "batch" and e["batch"] == 1 and e["query_version"] == 2 for e in q.events(after=seen))
    assert main(["control", out, "history"]) == 0
    log = capsys.readouterr().out
    assert "pause" in log and "reconfigure applied batch 000001" in log and "resume" in log
    assert main(["control", out, "breakpoint", "add", "--source", "S", "v <"]) == 2
    assert "BREAKPOINT_BAD_CONDITION" in capsys.readouterr().err
    check_every_commit(out, feed, SQL)


def test_events_can_be_polled_and_streamed(running):
    q, feed, out = running
    info = control_file(out)
    code, events = request(info["url"] + "/v1/events", token=info["token"], query="?after=0")
    assert code == 200 and events and events[0]["seq"] >= 1
    last = events[-1]["seq"]
    q.pause(wait=False)
    req = urllib.request.Request(f"{info['url']}/v1/events/stream?after={last}",
                                 headers={"Authorization": f"Bearer {info['token']}"})
    with urllib.request.urlopen(req, timeout=60) as stream:
        lines = []
        while not any(line.startswith("data:") for line in lines):
            lines.append(stream.readline().decode().strip())
    event = json.loads(next(line for line in lines if line.startswith("data:"))[5:])
    assert event["seq"] > last and event["type"] in ("action", "state")
    q.resume()
