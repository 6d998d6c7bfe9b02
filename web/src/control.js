// The control panel: pause, resume, skip, breakpoints, inspect and reconfigure the running query.
//
// What it shows is the query's controller status, which the server sends to every viewer (in
// the joining state, then as 'control' deltas) whoever acted — this page, another one, or
// `streamfold control` on the run's endpoint. So a page shows "paused" once the query is
// paused, not when its button is pressed. Actions go over HTTP; only an inspection's answer
// comes back to the page that asked (the log tells everyone that it was asked).

import { api, el, formatValue } from './api.js';

const $ = (id) => document.getElementById(id);

export class ControlPanel {
  // act(path, body) sends an action (errors shown by the caller); text() is the editor's text.
  constructor(queryId, act, compiled) {
    this.queryId = queryId;
    this.act = act;
    this.compiled = compiled;
    this.status = null;
    this.starting = null; // what a starting run is doing (its progress), while it has no controller
    $('pause').onclick = () => this.act('pause', {});
    $('resume').onclick = () => this.act('resume', {});
    $('skip').onclick = () => this.act('skip', {});
    $('reconfigure').onclick = () => this.act('reconfigure', { semantics: $('semantics').value });
    $('breakpoint-kind').onchange = () => this.showForm();
    $('breakpoint-form').onsubmit = (e) => { e.preventDefault(); this.addBreakpoint(); };
    $('inspect-form').onsubmit = (e) => { e.preventDefault(); this.inspect(); };
    this.showForm();
    this.show(null);
  }

  // The controller's status (null: the query is not running).
  show(status) {
    this.status = status;
    const state = status ? (status.breakpoint ? 'breakpoint' : status.state) : 'off';
    const pill = $('control-state');
    pill.className = 'status control-' + state;
    pill.textContent = describeState(status);
    const held = status && ['pausing', 'paused'].includes(status.state);
    $('pause').disabled = !status || held || status.state === 'stopped';
    $('resume').disabled = !held;
    const files = status && status.breakpoint ? Object.values(status.breakpoint.files || {}).flat() : [];
    $('skip').disabled = !(status && status.state === 'paused' && files.length);
    $('control-detail').replaceChildren(...detail(status, this.starting));
    this.showVersion();
    $('breakpoint-form').querySelector('button').disabled = !status;
    $('inspect-form').querySelector('button').disabled = !status;
    $('breakpoints').replaceChildren(...(status ? status.breakpoints : []).map((b) =>
      el('li', { 'data-id': b.id }, el('strong', { text: b.id }), ' ', b.description, ' ',
        el('button', { onclick: () => this.act(`breakpoints/${b.id}`, null) }, 'remove'))));
  }

  // A run that is starting has no controller yet: say what it is doing, not "run the query".
  showStarting(text) {
    if (text === this.starting) return;
    this.starting = text;
    if (!this.status) $('control-detail').replaceChildren(...detail(null, text));
  }

  // Reconfigure applies the editor's (shared) text: possible while running, once it compiles
  // and differs from the running version, one reconfiguration at a time.
  showVersion() {
    const status = this.status;
    const result = this.compiled();
    const running = status ? status.query : null;
    const same = running && result && result.ok && result.text === running.sql;
    $('reconfigure').disabled = !status || status.state === 'stopped' || !result || !result.ok || same ||
      !!status.reconfiguration;
    $('query-version').textContent = !running ? '' :
      `running query version ${running.version} (${running.semantics}, since batch ${running.since_batch})` +
      (status.reconfiguration ? ` · version ${status.reconfiguration.version} applies at the next batch boundary` :
        same ? ' · the editor shows it' : result && result.ok ? ' · the editor differs: apply to change it' : '');
  }

  showForm() {
    const kind = $('breakpoint-kind').value;
    $('breakpoint-target').hidden = !['source', 'state'].includes(kind);
    $('breakpoint-condition').hidden = kind === 'after';
    $('breakpoint-after').hidden = kind !== 'after';
    $('breakpoint-target').placeholder = kind === 'state' ? 'state (explain name)' : 'source';
  }

  addBreakpoint() {
    const kind = $('breakpoint-kind').value;
    const body = { kind };
    if (kind === 'after') body.after = parseInt($('breakpoint-after').value, 10) || 1;
    else body.condition = $('breakpoint-condition').value;
    if (['source', 'state'].includes(kind)) body.target = $('breakpoint-target').value;
    return this.act('breakpoints', body);
  }

  async inspect() {
    const box = $('inspect-result');
    box.replaceChildren(el('p', { class: 'empty', text: 'inspecting…' }));
    const refused = el('div', { class: 'error-line inspect-error' });
    const result = await this.act('inspect', { sql: $('inspect-sql').value, limit: 50 }, refused);
    if (!result) { box.replaceChildren(refused); return; }
    box.replaceChildren(
      el('div', { class: 'muted', text: `batch ${result.batch}${result.committed ? '' : ' (not committed yet)'}, ` +
        `${result.rows.length}${result.truncated ? '+' : ''} row${result.rows.length === 1 ? '' : 's'}` }),
      el('table', { class: 'result-table inspect-table' },
        el('thead', {}, el('tr', {}, result.columns.map((c) => el('th', { text: c.name, title: c.type })))),
        el('tbody', {}, result.rows.map((r) => el('tr', {}, r.map((v) => el('td', { text: formatValue(v) })))))));
  }
}

function describeState(status) {
  if (!status) return 'not running';
  if (status.breakpoint) return `paused at breakpoint ${status.breakpoint.breakpoint.id}, batch ${status.breakpoint.batch}`;
  const p = status.pause;
  // between batches the last committed batch is named; inside one, the batch that is not committed
  if (status.state === 'paused' && p) {
    return p.step === 'between batches' || !p.step ? `paused after batch ${status.last_committed}, between batches`
      : `paused in batch ${p.batch} (not committed), ${p.step}`;
  }
  if (status.state === 'pausing') return 'pausing…';
  if (status.state === 'idle') return `running · waiting for files after batch ${status.last_committed}`;
  if (status.state === 'running') return `running · batch ${status.batch}${status.step ? ', ' + status.step : ''}`;
  return status.state;
}

function detail(status, starting) {
  if (!status && starting) {
    return [el('p', { class: 'empty starting', text: `The run is starting: ${starting}. Pause, breakpoints and inspect ` +
      'work once it runs; Stop works now.' })];
  }
  if (!status) return [el('p', { class: 'empty', text: 'Run the query to control it.' })];
  const out = [];
  const hit = status.breakpoint;
  if (hit) {
    out.push(el('div', { class: 'breakpoint-hit' },
      el('strong', { text: `${hit.breakpoint.description}: ${hit.row_count} row(s) met it` }),
      ' — the batch is not committed: resume commits it as it is, reconfigure first changes the query it commits under' +
      (Object.values(hit.files || {}).flat().length ? ', skip quarantines its files' : ''),
      hit.rows.length ? el('pre', { class: 'hit-rows', text: hit.rows.slice(0, 5).map((r) => JSON.stringify(r)).join('\n') }) : null));
  }
  if (status.pause && status.pause.latency_s !== null && status.state === 'paused') {
    out.push(el('div', { class: 'muted', text: `pause took effect in ${Math.round(status.pause.latency_s * 1000)} ms` +
      (status.pause.cancelled_steps ? `, a running step cancelled (redone on resume)` : '') }));
  }
  for (const s of status.sinks || []) {
    const behind = status.last_committed - s.delivered;
    out.push(el('div', { class: s.failing ? 'error-line sink' : 'muted sink',
      text: `sink ${s.sink}: holds batch ${s.delivered}` + (behind > 0 ? ` · ${behind} behind` : ' · up to date') +
        (s.failing ? ' · failing, retried after the next commit' : '') }));
  }
  if (status.error) out.push(el('div', { class: 'error-line', text: status.error }));
  return out;
}
