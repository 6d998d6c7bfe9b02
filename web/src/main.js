// streamfold studio's page: one query at a time (#q=<id>), shared with every other viewer.
//
// The page keeps a copy of the query's shared state: it receives the whole state when it
// joins, then deltas (compile, run, control, batch, log, viewers, query), and draws every view
// from it. Actions (run, stop, bind, and the control panel's) go to the server over HTTP; their
// effects come back as deltas, to this page and every other one alike.

import { api, el, wsUrl, ApiError } from './api.js';
import { SharedEditor, colorFor, seatColors, viewerColor } from './editor.js';
import { drawGraph } from './graph.js';
import { ResultTable } from './table.js';
import { Chart } from './chart.js';
import { drawTimeline, logEntry } from './timeline.js';
import { ControlPanel } from './control.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const user = params.get('name') || localStorage.getItem('streamfold-name') ||
  'viewer-' + Math.random().toString(36).slice(2, 6);
localStorage.setItem('streamfold-name', user);

// A new query's text: a look at the workspace's first source, if it has one.
function example() {
  const first = state.sources.find((s) => s.columns.length && /^[A-Za-z_][A-Za-z0-9_]*$/.test(s.name));
  return '-- each directory of the workspace is a table, by its name\n' +
    (first ? `SELECT * FROM ${first.name}` : 'SELECT ...');
}

const state = { compile: null, run: null, control: null, timeline: [], log: [], query: null, sources: [], progress: null, waiting: {} };
const SOURCES_EVERY_MS = 3000; // the Sources panel's file counts are looked at this often
let editor, table, chart, control, queryId;

async function main() {
  $('user').textContent = user;
  $('user').style.color = colorFor(user);
  await refreshSources(false);
  const { queries } = await api('/api/queries');
  const wanted = (location.hash.match(/^#q=([a-z0-9-]+)/) || [])[1];
  queryId = queries.some((q) => q.id === wanted) ? wanted : queries.length ? queries[queries.length - 1].id : null;
  if (!queryId) {
    const { query } = await api('/api/queries', { method: 'POST', body: { name: 'first query', text: example() } });
    queries.push(query);
    queryId = query.id;
  }
  if (location.hash !== '#q=' + queryId) history.replaceState(null, '', '#q=' + queryId);
  drawQueryList(queries);
  window.addEventListener('hashchange', () => location.reload());

  editor = new SharedEditor($('editor'), queryId, user, () => document.body.classList.add('synced'));
  editor.text.observe(() => showCompile());
  table = new ResultTable($('table'), queryId, (label) => { chart.toggleLabel(label); table.picked = new Set(chart.labels.map(String)); table.render(); });
  chart = new Chart($('chart'), queryId);
  control = new ControlPanel(queryId, controlAct, () => (state.compile && state.compile.text === editor.value ? state.compile : null));
  window.streamfoldStudio = { editor, state, chart }; // for the browser tests and the console
  $('run').onclick = () => act('run');
  $('stop').onclick = () => act('stop');
  $('refresh-sources').onclick = refreshSources;
  $('new-query').onsubmit = newQuery;
  connectEvents();
  setInterval(() => refreshSources(false).catch(() => {}), SOURCES_EVERY_MS);
}

function drawQueryList(queries) {
  $('query-list').replaceChildren(...queries.map((q) =>
    el('option', { value: q.id, selected: q.id === queryId }, q.name)));
  $('query-list').onchange = (e) => { location.hash = '#q=' + e.target.value; };
}

async function newQuery(e) {
  e.preventDefault();
  const name = $('new-query-name').value.trim() || 'query';
  const { query } = await api('/api/queries', { method: 'POST', body: { name, text: example() } });
  location.hash = '#q=' + query.id;
}

// -- the shared state's channel -------------------------------------------------------------
function connectEvents(delay = 250) {
  const ws = new WebSocket(wsUrl(`/ws/events/${queryId}`, { name: user }));
  ws.onmessage = (m) => apply(JSON.parse(m.data));
  ws.onopen = () => { delay = 250; document.body.classList.add('connected'); };
  ws.onclose = () => {
    document.body.classList.remove('connected');
    setTimeout(() => connectEvents(Math.min(delay * 2, 5000)), delay);
  };
}

function apply(msg) {
  switch (msg.type) {
    case 'state':
      Object.assign(state, { compile: msg.compile, run: msg.run, control: msg.control, timeline: msg.timeline, log: msg.log, query: msg.query,
        progress: msg.progress, waiting: msg.waiting || {} });
      showViewers(msg.viewers, msg.colors);
      showQuery();
      showCompile();
      showRun();
      control.show(state.control);
      drawTimeline($('timeline'), state.timeline);
      $('log').replaceChildren(...state.log.map(logEntry));
      refreshResults(null);
      break;
    case 'compile':
      state.compile = msg.compile;
      showCompile();
      break;
    case 'control':
      state.control = msg.control;
      control.show(state.control);
      showRun();
      break;
    case 'progress':
      state.progress = msg.progress;
      showRun();
      break;
    case 'waiting':
      state.waiting = msg.waiting;
      showRun();
      break;
    case 'run':
      state.run = msg.run;
      showRun();
      if (msg.run.status === 'starting' && msg.run.last_batch < 0) { state.timeline = []; drawTimeline($('timeline'), []); }
      break;
    case 'batch':
      state.timeline.push(msg.commit);
      state.run.last_batch = msg.commit.batch;
      drawTimeline($('timeline'), state.timeline);
      refreshResults(msg.changes);
      showGraph();
      showRun();
      break;
    case 'log':
      state.log.push(msg.entry);
      $('log').append(logEntry(msg.entry));
      $('log').scrollTop = $('log').scrollHeight;
      break;
    case 'viewers':
      showViewers(msg.viewers, msg.colors);
      break;
    case 'query':
      state.query = msg.query;
      showQuery();
      break;
  }
}

function showViewers(names, colors) {
  seatColors(colors);
  $('viewers').replaceChildren(...names.map((n) => el('span', { class: 'viewer', style: `border-color:${viewerColor(n)}` }, n)));
  $('user').style.color = viewerColor(user);
  if (editor) editor.setColor(viewerColor(user));
}

function showQuery() {
  document.title = `${state.query.name} · streamfold studio`;
  drawSources();
}

// -- write: errors at their span, the plan as a graph ---------------------------------------
function showCompile() {
  const result = state.compile;
  if (!editor || !result) return;
  if (!editor.showCompile(result)) {
    $('errors').className = 'errors pending';
    return;
  }
  const box = $('errors');
  const err = result.error;
  if (err) {
    box.className = 'errors has-error';
    box.replaceChildren(
      el('div', { class: 'error-line' }, el('span', { class: 'error-code', text: err.code }), ' ', err.message,
        err.line ? el('span', { class: 'error-where', text: ` (line ${err.line}, column ${err.column})` }) : null),
      err.hint ? el('div', { class: 'hint', text: 'hint: ' + err.hint }) : null);
  } else {
    const plan = result.plan;
    box.className = 'errors ok';
    box.replaceChildren(el('div', {}, `compiles: ${plan.states.length} state${plan.states.length === 1 ? '' : 's'}, ` +
      `${plan.delta.length} step${plan.delta.length === 1 ? '' : 's'} of h, reading ` +
      (result.inputs.map((i) => `${i.name} (${i.path})`).join(', ') || 'no source')));
  }
  showGraph();
  drawSources();
  if (control) control.showVersion();
}

function showGraph() {
  const result = state.compile;
  if (!result) return;
  if (!result.ok) { // the editor's error, not the plan of a text that is no longer there
    const err = result.error;
    $('plan-note').textContent = 'the plan appears once the query compiles';
    $('graph').replaceChildren(el('div', { class: 'graph-error error-line' },
      el('span', { class: 'error-code', text: err.code }), ' ', err.message,
      err.line ? ` (line ${err.line}, column ${err.column})` : ''));
    return;
  }
  const running = state.run && state.run.sql === result.text;
  const commit = running && state.timeline.length ? state.timeline[state.timeline.length - 1] : null;
  $('plan-note').textContent = running ? (commit ? `rows after batch ${commit.batch}` : 'waiting for batch 0')
    : (state.run && state.run.sql ? 'the text differs from the last run: counts appear when it runs' : '');
  drawGraph($('graph'), result.graph, commit);
}

// -- sources ----------------------------------------------------------------------------------
// Pressing refresh recompiles; the periodic look recompiles only when a directory's format or
// columns changed (a first file in an empty one), and redraws only when something changed.
async function refreshSources(recompile = true) {
  const before = state.sources;
  state.sources = (await api('/api/sources')).sources;
  const shape = (list) => JSON.stringify(list.map((x) => [x.path, x.format, x.columns]));
  if (recompile || JSON.stringify(before) !== JSON.stringify(state.sources)) drawSources();
  if (recompile || (before.length && shape(before) !== shape(state.sources))) {
    await api(`/api/queries/${queryId}/compile`, { method: 'POST' });
  }
}

function drawSources() {
  const used = new Map((state.compile && state.compile.inputs || []).map((i) => [i.path, i.name]));
  const bindings = state.query ? state.query.bindings : [];
  const items = state.sources.map((s) => {
    const name = el('input', { value: bindings.find((b) => b.path === s.path)?.name || s.name, size: 10, 'aria-label': 'table name' });
    const isTable = el('input', { type: 'checkbox', title: 'a static table, read once' });
    return el('li', { class: used.has(s.path) ? 'source used' : 'source', 'data-path': s.path },
      el('div', { class: 'source-head' }, el('strong', { text: s.path }), ' ',
        el('span', { class: 'muted', text: s.format ? `${s.format}, ${s.files} file${s.files === 1 ? '' : 's'}` : 'no files yet' }),
        used.has(s.path) ? el('span', { class: 'badge', text: `read as ${used.get(s.path)}` }) : null),
      s.error ? el('div', { class: 'error-line', text: `[${s.error.code}] ${s.error.message}` }) : null,
      el('div', { class: 'columns', text: s.columns.map((c) => `${c.name} ${c.type}`).join(', ') }),
      el('form', { class: 'bind', onsubmit: (e) => { e.preventDefault(); bind(name.value, s.path, isTable.checked); } },
        'bind as ', name, ' ', el('label', {}, isTable, ' table'), ' ', el('button', { type: 'submit' }, 'bind')));
  });
  const bound = bindings.map((b) => el('li', {}, `${b.name} = ${b.path}${b.static ? ' (table)' : ''} `,
    el('button', { onclick: () => unbind(b.name) }, 'unbind')));
  $('sources').replaceChildren(el('ul', { class: 'source-list' }, items),
    el('div', { class: 'bindings' }, bound.length ? [el('h3', { text: 'bound by hand' }), el('ul', {}, bound)] : null));
}

async function bind(name, path, isStatic) {
  const rest = state.query.bindings.filter((b) => b.name.toLowerCase() !== name.toLowerCase());
  await guarded(() => api(`/api/queries/${queryId}/bindings`, {
    method: 'PUT', body: { actor: user, bindings: [...rest, { name, path, static: isStatic }] },
  }));
}

async function unbind(name) {
  await guarded(() => api(`/api/queries/${queryId}/bindings`, {
    method: 'PUT', body: { actor: user, bindings: state.query.bindings.filter((b) => b.name !== name) },
  }));
}

// -- run and watch ----------------------------------------------------------------------------
async function act(action) {
  await guarded(() => api(`/api/queries/${queryId}/${action}`, { method: 'POST', body: { actor: user } }));
}

// A control action: POST (DELETE when body is null) to the query's path; its answer, or null
// with the error shown in errorBox (next to the form that asked; the Run/Stop bar by default).
async function controlAct(path, body, errorBox) {
  return guarded(() => api(`/api/queries/${queryId}/${path}`, body === null
    ? { method: 'DELETE', query: { actor: user } } : { method: 'POST', body: { ...body, actor: user } }), errorBox);
}

async function guarded(fn, errorBox) {
  const box = errorBox || $('action-error');
  try {
    const result = await fn();
    box.textContent = '';
    return result;
  } catch (e) {
    box.textContent = e instanceof ApiError ? e.message : String(e);
    return null;
  }
}

// The run's pill (its status, paused as the controller says, the last committed batch), what it
// is doing (runtime/progress.py: the JVM starting, batch 0's stage and tasks) and the files waiting.
function showRun() {
  const run = state.run || { status: 'idle' };
  const ctl = state.control;
  const paused = run.status === 'running' && ctl && ['paused', 'pausing'].includes(ctl.state);
  const status = paused ? ctl.state : run.status;
  const pill = $('status');
  pill.textContent = status + (run.run ? ` · run ${run.run}` : '') + (run.last_batch >= 0 ? ` · after batch ${run.last_batch}` : '');
  pill.className = 'status status-' + status;
  $('run').disabled = ['starting', 'running', 'stopping'].includes(run.status);
  $('stop').disabled = !['starting', 'running'].includes(run.status);
  $('run-error').replaceChildren(...(run.error ? [el('span', { class: 'error-code', text: run.error.code }), ' ', run.error.message] : []));
  const p = state.progress;
  const active = ['starting', 'running', 'stopping'].includes(run.status);
  const doing = active && p && !(p.phase === 'waiting' && !paused) ? (paused ? '' : p.text + (p.elapsed_s >= 1 ? ` (${p.elapsed_s} s)` : '')) : '';
  const waiting = Object.entries(active ? state.waiting || {} : {}).filter(([, n]) => n > 0);
  const files = waiting.reduce((a, [, n]) => a + n, 0);
  const wait = files ? `${files} file${files === 1 ? '' : 's'} waiting (${waiting.map(([k, n]) => `${k}: ${n}`).join(', ')})` : '';
  $('progress').textContent = [doing, paused || !(p && p.phase === 'batch') ? wait : ''].filter(Boolean).join(' · ');
  const starting = run.status === 'starting' || (run.status === 'stopping' && !ctl);
  table.waiting = active && run.last_batch < 0 ? (p ? p.text : run.status) + (run.status === 'starting' ? ' — the answer appears once batch 0 commits' : '') : null;
  if (!table.page || table.page.batch < 0) table.render();
  control.showStarting(starting ? (p ? p.text : 'starting') : null);
}

async function refreshResults(changes) {
  if (changes) table.setChanges(changes);
  else if (state.timeline.length) {
    const last = state.timeline[state.timeline.length - 1].batch;
    try {
      table.setChanges(await api(`/api/queries/${queryId}/changes`, { query: { batch: last } }));
    } catch (e) { table.setChanges(null); }
  }
  await table.refresh();
  if (table.page && table.page.batch >= 0) {
    const drawn = chart.setColumns(table.page.columns, table.page.rows);
    table.picked = new Set(chart.labels.map(String));
    table.render();
    await drawn;
  }
}

main().catch((e) => { $('action-error').textContent = String(e); });
