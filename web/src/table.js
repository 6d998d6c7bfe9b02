// The live result table: a sorted page of the last snapshot, fetched from the server; rows
// that the last batch changed are marked, from the batch's changes (Texera's retractable mode:
// the page learns which rows changed and re-fetches only the page it shows).

import { api, el, formatValue } from './api.js';

export class ResultTable {
  constructor(container, queryId, onPick) {
    this.container = container;
    this.queryId = queryId;
    this.onPick = onPick;
    this.sort = null;
    this.desc = false;
    this.offset = 0;
    this.limit = 20;
    this.page = null;
    this.changed = new Set();
    this.changeCounts = null;
    this.picked = new Set();
    this.render();
  }

  // A committed batch's changes: remember which rows it inserted or updated.
  setChanges(changes) {
    this.changed = new Set();
    if (!changes) { this.changeCounts = null; return; }
    const w = changes.columns.indexOf('_weight');
    const cols = changes.columns.filter((c) => c !== '_weight');
    let plus = 0, minus = 0;
    for (const row of changes.rows) {
      const values = row.filter((_, i) => i !== w);
      if (row[w] > 0) { plus += row[w]; this.changed.add(rowKey(cols, values)); } else minus -= row[w];
    }
    this.changeCounts = { batch: changes.batch, plus, minus, total: changes.total, truncated: changes.truncated };
  }

  async refresh() {
    this.page = await api(`/api/queries/${this.queryId}/answer`, {
      query: { sort: this.sort, desc: this.desc, offset: this.offset, limit: this.limit },
    });
    this.render();
  }

  render() {
    const p = this.page;
    if (!p || p.batch < 0) {
      this.container.replaceChildren(el('p', { class: 'empty', text: this.waiting || 'No batch yet: run the query.' }));
      return;
    }
    const head = el('tr', {}, p.columns.map((c) => el('th', {
      class: 'sortable' + (this.sort === c ? (this.desc ? ' sorted-desc' : ' sorted-asc') : ''),
      title: 'sort by ' + c,
      onclick: () => {
        if (this.sort === c) this.desc = !this.desc; else { this.sort = c; this.desc = false; }
        this.offset = 0;
        this.refresh();
      },
    }, c)));
    const body = p.rows.map((row) => {
      const key = rowKey(p.columns, row);
      const changed = this.changed.has(key) && this.changeCounts && this.changeCounts.batch === p.batch;
      return el('tr', {
        class: [changed ? 'changed' : '', this.picked.has(String(row[0])) ? 'picked' : ''].join(' ').trim() || null,
        title: changed ? `changed in batch ${p.batch}` : null,
        onclick: () => this.onPick && this.onPick(row[0]),
      }, row.map((v) => el('td', { class: typeof v === 'number' ? 'num' : null }, formatValue(v))));
    });
    const last = Math.min(p.offset + p.rows.length, p.total);
    const c = this.changeCounts;
    const summary = `after batch ${p.batch} · rows ${p.total ? p.offset + 1 : 0}–${last} of ${p.total.toLocaleString()}` +
      (c && c.batch === p.batch ? ` · batch ${c.batch} changed ${c.total} row${c.total === 1 ? '' : 's'} (+${c.plus} −${c.minus})` : '');
    this.container.replaceChildren(
      el('div', { class: 'table-bar' },
        el('span', { class: 'table-summary', text: summary }),
        el('button', { disabled: p.offset === 0, onclick: () => { this.offset = Math.max(0, this.offset - this.limit); this.refresh(); } }, '‹ prev'),
        el('button', { disabled: last >= p.total, onclick: () => { this.offset += this.limit; this.refresh(); } }, 'next ›')),
      el('table', { class: 'result-table' }, el('thead', {}, head), el('tbody', {}, body)));
  }
}

export function rowKey(columns, values) {
  const byName = {};
  columns.forEach((c, i) => { byName[c] = values[i]; });
  return JSON.stringify(Object.keys(byName).sort().map((k) => byName[k]));
}
