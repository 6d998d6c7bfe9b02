"""streamfold studio in a real headless Chromium (Debian's, driven by Playwright): a typo shows its
coded error at its span, two pages editing one query converge, a run's table updates as files
arrive, for every viewer, and the running query is paused, stopped at a breakpoint, inspected,
resumed and reconfigured from the page, every page showing the query's state.

One studio server and one browser serve the whole module. With STREAMFOLD_STUDIO_SCREENSHOTS=DIR
the tests write their screenshots of each view to DIR (``docs/img`` for docs/studio.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from collections import defaultdict
from itertools import zip_longest

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.studio.app import STATIC, Studio, create_app
from streamfold.studio.workspace import Workspace

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = os.environ.get("STREAMFOLD_STUDIO_SCREENSHOTS")
WAIT_MS = 20_000
RUN_WAIT_MS = 180_000  # a first batch may start the JVM


def _missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"Debian's chromium is not installed at {CHROMIUM} (make setup installs it with apt-get)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (make setup installs the pinned version)"
    if not os.path.isfile(os.path.join(STATIC, "app.js")):
        return "the studio's page is not built (make setup builds it with npm and esbuild)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=f"browser tests skipped: {_missing()}")

BATCHES = [
    {"region": ["eu", "us", "eu", "asia"], "amount": [10, 20, 30, 5]},
    {"region": ["eu", "africa"], "amount": [7, 11]},
]


def _write(directory: str, name: str, columns: dict) -> None:
    hidden = os.path.join(directory, "." + name)
    pq.write_table(pa.table(columns), hidden)
    os.rename(hidden, os.path.join(directory, name))  # appears whole, as a writer should do it


def _totals(batches: list[dict]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for b in batches:
        for region, amount in zip(b["region"], b["amount"]):
            out[region] += amount
    return dict(out)


class Server:
    """The studio on a free port of 127.0.0.1, in a thread of the test process."""

    def __init__(self, root: str) -> None:
        import uvicorn

        from streamfold.studio import listen

        self.root = root
        self.studio = Studio(Workspace(root))
        sock = listen("127.0.0.1", 0)
        self.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(self.studio), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the studio did not start"
            time.sleep(0.05)

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"X-Streamfold-Token": self.studio.token,
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def new_query(self, name: str, text: str) -> str:
        return self.post("/api/queries", {"name": name, "text": text})["query"]["id"]

    def url(self, qid: str, name: str) -> str:
        return f"{self.base}/?token={self.studio.token}&name={name}#q={qid}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("studio-ws")
    os.makedirs(root / "orders")
    _write(str(root / "orders"), "0001.parquet", BATCHES[0])
    os.makedirs(root / "ref" / "regions")
    (root / "ref" / "regions" / "regions.csv").write_text("region,zone\neu,emea\nus,amer\nasia,apac\n")
    s = Server(str(root))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def open_page(browser, server):
    """Pages in contexts of their own (separate browsers, as two people would have)."""
    contexts = []

    def open_(qid: str, name: str):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        contexts.append(ctx)
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url(qid, name))
        page.wait_for_selector("body.synced.connected", timeout=WAIT_MS)
        page.errors = errors  # type: ignore[attr-defined]
        return page

    yield open_
    for ctx in contexts:
        ctx.close()


def text_of(page) -> str:
    return page.evaluate("() => window.streamfoldStudio.editor.value")


def type_at(page, where: str, text: str) -> None:
    page.click(".cm-content")
    page.keyboard.press(where)
    page.keyboard.type(text)


def shoot(page, name: str, selector: str | None = None) -> None:
    if not SHOTS:
        return
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, f"studio-{name}.png")
    if selector:
        page.locator(selector).screenshot(path=path)
    else:
        page.screenshot(path=path, full_page=True)


def test_a_typo_shows_its_coded_error_at_its_span_as_you_type(server, open_page):
    from playwright.sync_api import expect

    page = open_page(server.new_query("typo", ""), "ann")
    type_at(page, "Control+End", "SELECT r.zone, sum(o.amont) AS total\n"
                                  "FROM orders o JOIN regions r ON o.region = r.region GROUP BY r.zone")
    errors = page.locator("#errors")
    expect(errors).to_contain_text("UNKNOWN_COLUMN", timeout=WAIT_MS)
    expect(errors).to_contain_text("did you mean `amount`?")
    expect(errors).to_contain_text("line 1, column 20")
    expect(page.locator(".cm-lintRange-error")).to_have_text("o.amont")
    shoot(page, "write", "#panel-write")

    page.keyboard.press("Control+Home")
    for _ in range(len("SELECT r.zone, sum(o.amo")):
        page.keyboard.press("ArrowRight")
    page.keyboard.type("u")
    expect(errors).to_have_class("errors ok", timeout=WAIT_MS)
    expect(page.locator(".cm-lintRange-error")).to_have_count(0)
    # The plan: both sources (the CSV one found by its directory's name), a state per join input
    # and the aggregate, a step reading a state as it was before the batch (dashed, backwards).
    expect(page.locator("#graph .node-source .node-label")).to_have_text(["orders", "regions"])
    expect(page.locator("#graph .node-answer .node-detail")).to_have_text("zone, total")
    expect(page.locator("#graph .node-state")).to_have_count(3)
    expect(page.locator("#graph .edge-old")).not_to_have_count(0)
    expect(errors).to_contain_text("reading orders (orders), regions (ref/regions)")
    shoot(page, "plan-join", "#panel-plan")
    # A new typo: the plan panel shows the editor's error, not the plan of the text before it.
    page.keyboard.press("Control+End")
    page.keyboard.type("x")
    expect(page.locator("#graph .graph-error")).to_contain_text("UNKNOWN_COLUMN", timeout=WAIT_MS)
    expect(page.locator("#graph .node")).to_have_count(0)
    page.keyboard.press("Backspace")
    expect(page.locator("#graph .node-state")).to_have_count(3, timeout=WAIT_MS)
    assert page.errors == []  # type: ignore[attr-defined]


def test_two_pages_editing_one_query_converge_and_a_late_joiner_gets_the_text(server, open_page):
    from playwright.sync_api import expect

    qid = server.new_query("together", "SELECT region, amount FROM orders")
    ann, bob = open_page(qid, "ann"), open_page(qid, "bob")
    # Both type before either has seen the other's keystrokes arrive.
    ann.click(".cm-content")
    bob.click(".cm-content")
    ann.keyboard.press("Control+Home")
    bob.keyboard.press("Control+End")
    for a, b in zip_longest("-- ann was here\n", " WHERE amount > 5", fillvalue=""):
        ann.keyboard.type(a)
        bob.keyboard.type(b)
    want = "-- ann was here\nSELECT region, amount FROM orders WHERE amount > 5"
    for page in (ann, bob):
        expect(page.locator(".cm-content")).to_contain_text("ann was here", timeout=WAIT_MS)
    deadline = time.monotonic() + WAIT_MS / 1000
    while not text_of(ann).rstrip() == text_of(bob).rstrip() == want:
        assert time.monotonic() < deadline, (text_of(ann), text_of(bob))
        time.sleep(0.1)
    assert text_of(ann) == text_of(bob)
    expect(ann.locator(".cm-ySelectionInfo")).to_have_text("bob", timeout=WAIT_MS)  # bob's cursor, named
    expect(ann.locator("#viewers")).to_have_text("annbob")
    colours = ann.evaluate("() => [...document.querySelectorAll('#viewers .viewer')]"
                           ".map((v) => getComputedStyle(v).borderBottomColor)")
    assert len(set(colours)) == 2, colours  # two viewers, two colours (seats, not a hash of the name)
    assert bob.evaluate("() => getComputedStyle(document.getElementById('user')).color") == colours[1]
    late = open_page(qid, "cy")
    assert text_of(late) == text_of(ann)
    expect(late.locator("#errors")).to_have_class("errors ok", timeout=WAIT_MS)  # the shared compile result
    shoot(ann, "together", "#panel-write")


@pytest.mark.spark
def test_a_run_shows_the_answer_and_every_viewer_sees_the_table_update_as_files_arrive(server, open_page, spark):
    from playwright.sync_api import expect

    server.studio.spark = spark
    qid = server.new_query("totals", "SELECT region, sum(amount) AS total FROM orders GROUP BY region")
    ann = open_page(qid, "ann")
    expect(ann.locator("#errors")).to_have_class("errors ok", timeout=WAIT_MS)
    ann.click("#run")
    summary = ann.locator(".table-summary")
    expect(summary).to_contain_text("after batch 0", timeout=RUN_WAIT_MS)
    assert table_rows(ann) == _totals(BATCHES[:1])

    bob = open_page(qid, "bob")  # joins a running query: its state, then its deltas
    expect(bob.locator("#status")).to_contain_text("running")
    expect(bob.locator(".table-summary")).to_contain_text("after batch 0", timeout=WAIT_MS)

    _write(os.path.join(server.root, "orders"), "0002.parquet", BATCHES[1])
    for page in (ann, bob):
        expect(page.locator(".table-summary")).to_contain_text("after batch 1", timeout=RUN_WAIT_MS)
        assert table_rows(page) == _totals(BATCHES)
        changed = {r.split("\t")[0] for r in page.locator(".result-table tr.changed").all_inner_texts()}
        assert changed == set(BATCHES[1]["region"])  # eu's total changed, africa is new; us, asia kept
    expect(ann.locator(".timeline-table tbody tr")).to_have_count(2)
    # each state's rows over the batches, from the commit records: a line of two points per state
    lines = ann.locator("#timeline svg.state-rows polyline")
    expect(lines).not_to_have_count(0)
    assert all(len(line.get_attribute("points").split()) == 2 for line in lines.all())
    expect(ann.locator("#timeline svg.state-bytes")).not_to_have_count(0)  # the commits record each state's bytes
    expect(ann.locator("#graph .node-answer .node-count")).to_have_text("4 rows, 3 in changes")  # eu −40 +47, africa +11
    expect(ann.locator("#chart polyline")).not_to_have_count(0)
    expect(ann.locator("#chart .chart-legend .legend")).not_to_have_count(0)

    ann.locator(".result-table th", has_text="total").click()  # sorted by the server, ascending
    expect(ann.locator(".result-table tbody tr").first).to_contain_text("asia")
    shoot(ann, "results", "#panel-results")
    shoot(ann, "chart", "#panel-chart")
    shoot(ann, "timeline", "#panel-timeline")
    shoot(ann, "plan", "#panel-plan")
    shoot(ann, "page")
    # Long values: every tick label is inside the plot's box, and the legend is not over the lines.
    ann.evaluate("""() => { const c = window.streamfoldStudio.chart;
        c.data = { batches: [0, 1, 2], series: { eu: [83604.53, 1.5, 40000], us: [5, 9876543.21, 7] } }; c.render(); }""")
    expect(ann.locator("#chart text.tick").first).to_have_text("9876543.21")
    boxes = ann.evaluate("() => [...document.querySelectorAll('#chart text.tick')].map((t) => t.getBBox().x)")
    assert min(boxes) >= 0, boxes
    assert ann.locator("#chart svg .legend").count() == 0
    expect(ann.locator("#chart .chart-legend")).to_have_text("region = eu region = us")

    bob.click("#stop")
    for page in (ann, bob):
        expect(page.locator("#status")).to_contain_text("stopped", timeout=RUN_WAIT_MS)
    expect(ann.locator("#log")).to_contain_text("ann started run 1")
    expect(ann.locator("#log")).to_contain_text("bob stopping run 1")
    assert ann.errors == [] and bob.errors == []  # type: ignore[attr-defined]

    # The outputs outlive the studio: a new one on the same workspace shows the same run.
    from starlette.testclient import TestClient

    again = Studio(Workspace(server.root), token="t")
    with TestClient(create_app(again)) as client:
        state = client.get(f"/api/queries/{qid}", params={"token": "t"}).json()
        assert [c["batch"] for c in state["timeline"]] == [0, 1] and state["run"]["status"] == "stopped"
        page = client.get(f"/api/queries/{qid}/answer", params={"token": "t", "sort": "region"}).json()
        assert {r[0]: r[1] for r in page["rows"]} == _totals(BATCHES)


def table_rows(page) -> dict[str, int]:
    rows = page.locator(".result-table tbody tr").all_inner_texts()
    return {r.split("\t")[0]: int(r.split("\t")[1]) for r in rows}


def _run_to_batch_0(server, open_page, spark, source: str, sql: str):
    """A query over a source directory of its own, run from ann's page until batch 0 commits."""
    from playwright.sync_api import expect

    server.studio.spark = spark
    os.makedirs(os.path.join(server.root, source))
    _write(os.path.join(server.root, source), "0001.parquet", BATCHES[0])
    qid = server.new_query(source, sql)
    ann = open_page(qid, "ann")
    expect(ann.locator("#errors")).to_have_class("errors ok", timeout=WAIT_MS)
    ann.click("#run")
    expect(ann.locator(".table-summary")).to_contain_text("after batch 0", timeout=RUN_WAIT_MS)
    return qid, ann


def _stop(pages) -> None:
    from playwright.sync_api import expect

    pages[0].click("#stop")
    for page in pages:
        expect(page.locator("#status")).to_contain_text("stopped", timeout=RUN_WAIT_MS)
        expect(page.locator("#control-state")).to_have_text("not running")
        assert page.errors == []  # type: ignore[attr-defined]


@pytest.mark.spark
def test_any_viewer_pauses_or_a_breakpoint_stops_the_query_for_every_page_and_resume_goes_on(server, open_page, spark):
    from playwright.sync_api import expect

    qid, ann = _run_to_batch_0(server, open_page, spark, "sales",
                               "SELECT region, sum(amount) AS total FROM sales GROUP BY region")
    ann.select_option("#breakpoint-kind", "source")
    ann.fill("#breakpoint-target", "sales")
    ann.fill("#breakpoint-condition", "amount > 10")
    ann.click("#breakpoint-form button")
    bob = open_page(qid, "bob")
    expect(bob.locator("#breakpoints li")).to_have_text("b1 source sales: amount > 10 remove")
    bob.click("#pause")
    for page in (ann, bob):  # shown once the query is paused, on every page
        # batch 0 is the last committed one: the panel names it, the pill says paused
        expect(page.locator("#control-state")).to_contain_text("paused after batch 0, between batches",
                                                               timeout=WAIT_MS)
        expect(page.locator("#status")).to_have_text("paused · run 1 · after batch 0")
        expect(page.locator("#resume")).to_be_enabled()
        expect(page.locator("#pause")).to_be_disabled()
    _write(os.path.join(server.root, "sales"), "0002.parquet", BATCHES[1])
    time.sleep(2.0)  # four polls of the run: the file waits
    late = open_page(qid, "cy")  # joins a paused query: it gets the current state
    expect(late.locator("#control-state")).to_contain_text("paused after batch 0")
    expect(late.locator("#resume")).to_be_enabled()
    for page in (ann, late):  # the file waiting is shown, and the Sources panel counts it unasked
        expect(page.locator("#progress")).to_have_text("1 file waiting (sales: 1)", timeout=WAIT_MS)
        expect(page.locator('#sources li[data-path="sales"] .source-head')).to_contain_text("2 files",
                                                                                            timeout=WAIT_MS)
    for page in (ann, bob, late):
        expect(page.locator(".table-summary")).to_contain_text("after batch 0")

    # Inspect while paused: read-only SQL over the committed snapshot; a write is refused, coded.
    late.fill("#inspect-sql", "SELECT region, total FROM snapshot WHERE total > 10 ORDER BY region")
    late.click("#inspect-form button")
    expect(late.locator(".inspect-table tbody tr")).to_have_count(2, timeout=WAIT_MS)
    assert late.locator(".inspect-table tbody tr").all_inner_texts() == ["eu\t40", "us\t20"]
    shoot(late, "control", "#panel-control")
    late.fill("#inspect-sql", "DROP TABLE snapshot")
    late.click("#inspect-form button")  # refused: said next to the inspect box, and in everyone's log
    expect(late.locator("#inspect-result .inspect-error")).to_contain_text("INSPECT_", timeout=WAIT_MS)
    expect(late.locator("#action-error")).to_have_text("")
    expect(ann.locator("#log")).to_contain_text("cy inspect was refused: DROP TABLE snapshot")

    ann.click("#resume")  # batch 1 runs over the file that waited, and meets the breakpoint before its commit
    for page in (ann, bob, late):
        expect(page.locator("#control-state")).to_have_text("paused at breakpoint b1, batch 1", timeout=RUN_WAIT_MS)
        expect(page.locator(".breakpoint-hit")).to_contain_text("1 row(s) met it")
        expect(page.locator("#skip")).to_be_enabled()
    expect(ann.locator(".table-summary")).to_contain_text("after batch 0")
    shoot(bob, "breakpoint", "#panel-control")
    bob.click("#resume")  # commits the batch as it is
    for page in (ann, bob, late):
        expect(page.locator(".table-summary")).to_contain_text("after batch 1", timeout=RUN_WAIT_MS)
        assert table_rows(page) == _totals(BATCHES)
        expect(page.locator("#control-state")).to_contain_text("running")
    expect(ann.locator("#log")).to_contain_text("bob paused after batch 0, between batches")
    expect(ann.locator("#log")).to_contain_text("ann added breakpoint b1")
    expect(ann.locator("#log")).to_contain_text("breakpoint b1 hit at batch 1")
    expect(ann.locator("#log")).to_contain_text("ann resumed")
    expect(ann.locator("#log")).to_contain_text("cy inspected batch 0")
    _stop([ann, bob, late])


@pytest.mark.spark
def test_the_running_query_is_reconfigured_from_the_page_and_every_viewer_sees_the_new_answer(
        server, open_page, spark):
    from playwright.sync_api import expect

    qid, ann = _run_to_batch_0(server, open_page, spark, "visits",
                               "SELECT region, sum(amount) AS total FROM visits GROUP BY region")
    bob = open_page(qid, "bob")
    expect(bob.locator("#query-version")).to_contain_text("running query version 1")
    expect(bob.locator("#reconfigure")).to_be_disabled()  # the editor shows the running text
    type_at(bob, "Control+End", " HAVING sum(amount) > 10")
    for page in (ann, bob):
        expect(page.locator("#query-version")).to_contain_text("the editor differs", timeout=WAIT_MS)
    bob.click("#reconfigure")
    # An answer-only change (HAVING): the states are kept, and a batch commits the new answer
    # without waiting for new files.
    for page in (ann, bob):
        expect(page.locator("#query-version")).to_contain_text("running query version 2 (restate, since batch 1)",
                                                               timeout=RUN_WAIT_MS)
        expect(page.locator(".table-summary")).to_contain_text("after batch 1", timeout=RUN_WAIT_MS)
        assert table_rows(page) == {r: t for r, t in _totals(BATCHES[:1]).items() if t > 10}
    expect(ann.locator("#log")).to_contain_text("bob reconfigured to query version 2 (restate)")
    expect(ann.locator("#log")).to_contain_text("query version 2 (restate) applied at batch 1")
    shoot(bob, "reconfigure", "#panel-control")

    _write(os.path.join(server.root, "visits"), "0002.parquet", BATCHES[1])
    expect(ann.locator(".table-summary")).to_contain_text("after batch 2", timeout=RUN_WAIT_MS)
    assert table_rows(ann) == {r: t for r, t in _totals(BATCHES).items() if t > 10}
    _stop([ann, bob])


@pytest.mark.spark
def test_while_a_run_starts_the_page_says_what_it_does_and_stop_ends_it_before_any_batch(
        server, open_page, spark, monkeypatch):
    """The first minute: the start is held (as a cold JVM or a large input's schema would hold
    it) while the page is looked at; Stop then ends the run before its first batch. A second
    run goes through, and the page follows batch 0's progress until its answer is there."""
    import streamfold
    from playwright.sync_api import expect

    server.studio.spark = spark
    os.makedirs(os.path.join(server.root, "clicks"))
    _write(os.path.join(server.root, "clicks"), "0001.parquet", BATCHES[0])
    qid = server.new_query("clicks", "SELECT region, sum(amount) AS total FROM clicks GROUP BY region")
    held, real_start = threading.Event(), streamfold.start

    def slow_start(*args, **kwargs):
        assert held.wait(RUN_WAIT_MS / 1000)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(streamfold, "start", slow_start)
    ann = open_page(qid, "ann")
    expect(ann.locator("#errors")).to_have_class("errors ok", timeout=WAIT_MS)
    ann.click("#run")
    expect(ann.locator("#status")).to_contain_text("starting · run 1", timeout=WAIT_MS)
    expect(ann.locator("#progress")).to_contain_text("reading the inputs' schemas and planning", timeout=WAIT_MS)
    expect(ann.locator("#table")).to_contain_text("reading the inputs' schemas and planning")
    expect(ann.locator("#table")).not_to_contain_text("run the query")
    expect(ann.locator("#control-detail")).to_contain_text("The run is starting")
    expect(ann.locator("#stop")).to_be_enabled()
    ann.click("#stop")
    expect(ann.locator("#status")).to_contain_text("stopping", timeout=WAIT_MS)
    held.set()  # the start goes on to where it looks at the Stop, and ends there
    expect(ann.locator("#status")).to_contain_text("stopped", timeout=RUN_WAIT_MS)
    expect(ann.locator("#log")).to_contain_text("ann stopping run 1 while it starts")
    expect(ann.locator("#log")).to_contain_text("run 1 stopped while it started, before its first batch")
    output = os.path.join(server.root, ".studio", "queries", qid)
    commits = [f for d, _, fs in os.walk(output) for f in fs if d.endswith("commits")]
    assert commits == []  # nothing ran

    # Run again: every step batch 0 goes through is shown as it comes.
    ann.evaluate("""() => { window.seen = []; new MutationObserver(() =>
        window.seen.push(document.getElementById('progress').textContent)).observe(
        document.getElementById('progress'), { childList: true, characterData: true, subtree: true }); }""")
    ann.click("#run")
    expect(ann.locator(".table-summary")).to_contain_text("after batch 0", timeout=RUN_WAIT_MS)
    seen = ann.evaluate("() => window.seen")
    assert any(t.startswith("batch 0: ") and "1 file" in t for t in seen), seen
    expect(ann.locator("#status")).to_contain_text("running · run 1 · after batch 0")  # the same run, resumed
    _stop([ann])


@pytest.mark.spark
def test_the_control_panel_shows_each_sink_and_the_batch_it_holds(server, open_page, spark, monkeypatch):
    """A studio started with ``--sink answers/bysink:delta``: the control panel names the sink,
    the last batch it holds and whether it is up to date, batch after batch."""
    from playwright.sync_api import expect

    from streamfold.studio.app import studio_sinks

    monkeypatch.setattr(server.studio, "sinks", studio_sinks(server.studio.workspace, ["answers/bysink:delta"]))
    qid, ann = _run_to_batch_0(server, open_page, spark, "bysink",
                               "SELECT region, sum(amount) AS total FROM bysink GROUP BY region")
    expect(ann.locator("#control-detail")).to_contain_text("answers/bysink", timeout=RUN_WAIT_MS)
    expect(ann.locator("#control-detail")).to_contain_text("holds batch 0 · up to date", timeout=RUN_WAIT_MS)
    _write(os.path.join(server.root, "bysink"), "0002.parquet", BATCHES[1])
    expect(ann.locator("#control-detail")).to_contain_text("holds batch 1 · up to date", timeout=RUN_WAIT_MS)
    _stop([ann])
