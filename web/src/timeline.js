// The batch timeline (from the commits: duration, rows in, state sizes, and whatever else a
// commit records, e.g. a strategy) and the log of actions and errors.

import { el, svg } from './api.js';

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
  container.replaceChildren(bars, el('table', { class: 'timeline-table' },
    el('thead', {}, el('tr', {}, ['batch', 's', 'rows in', 'state rows', 'answer', 'changes', 'strategy'].map((h) => el('th', { text: h })))),
    el('tbody', {}, rows)));
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
