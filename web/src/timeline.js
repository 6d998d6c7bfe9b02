// The batch timeline (from the commits: duration, rows in, state sizes, and whatever else a
// commit records, e.g. a strategy) and the log of actions and errors.

import { el, svg } from './api.js';
import { colorFor } from './editor.js';

const SHOWN = 60, BAR = 8, HEIGHT = 90;

export function drawTimeline(container, commits) {
  if (!commits.length) {
    container.replaceChildren(el('p', { class: 'empty', text: 'No batch committed yet.' }));
    return;
  }
  const recent = commits.slice(-SHOWN);
  const top = Math.max(...recent.map((c) => c.duration_s || 0), 0.001);
  const bars = svg('svg', { width: recent.length * (BAR + 2) + 60, height: HEIGHT + 16, class: 'timeline' });
  recent.forEach((c, i) => {
    const h = Math.max(1, (c.duration_s || 0) / top * HEIGHT);
    bars.append(svg('rect', { x: 56 + i * (BAR + 2), y: HEIGHT - h, width: BAR, height: h, class: 'bar' },
      svg('title', { text: describe(c) })));
  });
  bars.append(svg('text', { x: 52, y: 10, 'text-anchor': 'end', class: 'tick', text: `${top.toFixed(2)} s` }));
  bars.append(svg('text', { x: 52, y: HEIGHT, 'text-anchor': 'end', class: 'tick', text: '0' }));
  const rows = commits.slice(-8).reverse().map((c) => el('tr', { 'data-batch': c.batch },
    el('td', { class: 'num', text: c.batch }),
    el('td', { class: 'num', text: (c.duration_s ?? 0).toFixed(2) }),
    el('td', { text: pairs(c.rows, '+') }),
    el('td', { text: pairs(c.state_rows, '') }),
    el('td', { class: 'num', text: c.snapshot_rows ?? '' }),
    el('td', { class: 'num', text: c.change_rows ?? '' }),
    el('td', { text: c.strategy ? (typeof c.strategy === 'string' ? c.strategy : JSON.stringify(c.strategy)) : '' })));
  const sizes = [stateSizes(recent, 'state_rows', 'rows'), stateSizes(recent, 'state_bytes', 'bytes')].filter(Boolean);
  container.replaceChildren(bars, ...sizes,
    el('table', { class: 'timeline-table' },
    el('thead', {}, el('tr', {}, ['batch', 's', 'rows in', 'state rows', 'answer', 'changes', 'strategy'].map((h) => el('th', { text: h })))),
    el('tbody', {}, rows)));
}

// Each state's size over the recent batches, from the commit records (state_rows in every one;
// state_bytes where the run records Spark's storage figures): one line per state.
const SIZE_W = 460, SIZE_H = 110, SIZE_PAD = { l: 64, r: 8, t: 8, b: 18 };

function stateSizes(recent, field, unit) {
  const names = [...new Set(recent.flatMap((c) => Object.keys(c[field] || {})))];
  if (!names.length) return null;
  const values = recent.flatMap((c) => Object.values(c[field] || {}).map(Number));
  const top = Math.max(...values, 1);
  const b0 = recent[0].batch, b1 = Math.max(recent[recent.length - 1].batch, b0 + 1);
  const x = (b) => SIZE_PAD.l + (b - b0) / (b1 - b0) * (SIZE_W - SIZE_PAD.l - SIZE_PAD.r);
  const y = (v) => SIZE_PAD.t + (1 - v / top) * (SIZE_H - SIZE_PAD.t - SIZE_PAD.b);
  const root = svg('svg', { width: SIZE_W, height: SIZE_H, class: `state-sizes state-${unit}` });
  root.append(svg('text', { x: SIZE_PAD.l - 4, y: SIZE_PAD.t + 8, 'text-anchor': 'end', class: 'tick', text: `${top.toLocaleString()} ${unit}` }));
  root.append(svg('text', { x: SIZE_PAD.l - 4, y: SIZE_H - SIZE_PAD.b, 'text-anchor': 'end', class: 'tick', text: '0' }));
  root.append(svg('text', { x: SIZE_PAD.l, y: SIZE_H - 4, class: 'tick', text: `batch ${b0}` }));
  root.append(svg('text', { x: SIZE_W - SIZE_PAD.r, y: SIZE_H - 4, 'text-anchor': 'end', class: 'tick', text: `batch ${b1}` }));
  for (const name of names) {
    const pts = recent.filter((c) => c[field] && c[field][name] !== undefined)
      .map((c) => `${x(c.batch)},${y(Number(c[field][name]))}`);
    root.append(svg('polyline', { points: pts.join(' '), stroke: colorFor(name), class: 'series', 'data-state': name },
      svg('title', { text: name })));
  }
  return el('div', { class: 'state-chart' }, el('div', { class: 'muted', text: `each state's ${unit} over batches` }), root,
    el('div', { class: 'chart-legend' }, names.map((n) => el('span', { class: 'legend', style: `color:${colorFor(n)}` },
      el('span', { class: 'swatch', style: `background:${colorFor(n)}` }), ' ' + n))));
}

function describe(c) {
  return `batch ${c.batch}: ${(c.duration_s ?? 0).toFixed(2)} s\nrows in: ${pairs(c.rows, '+')}\nstates: ${pairs(c.state_rows, '')}` +
    `\nanswer ${c.snapshot_rows} rows, ${c.change_rows} changed`;
}

function pairs(map, sign) {
  return Object.entries(map || {}).map(([k, v]) => `${k} ${sign}${Number(v).toLocaleString()}`).join(', ');
}

export function logEntry(entry) {
  const when = new Date(entry.at * 1000).toLocaleTimeString();
  const err = entry.error;
  return el('li', { class: 'log-' + entry.level },
    el('span', { class: 'log-time', text: when }), ' ',
    el('span', { class: 'log-actor', text: entry.actor }), ' ',
    el('span', { class: 'log-message', text: entry.message }),
    err ? el('div', { class: 'log-error' }, `[${err.code}] ${err.message}`, err.hint ? el('div', { class: 'hint', text: 'hint: ' + err.hint }) : null) : null);
}
