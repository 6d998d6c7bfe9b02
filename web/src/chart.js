// A chart of a chosen column over batches: one line per chosen row (by a label column, e.g. a
// group's key), or the single row of a global aggregate. Fetched incrementally: each new batch
// asks only for the batches after the last one drawn.

import { api, el, svg, formatValue } from './api.js';
import { colorFor } from './editor.js';

const WIDTH = 460, HEIGHT = 200, PAD = { r: 12, t: 10, b: 26 };
const TICK_FONT = '11px system-ui, sans-serif'; // as .chart text in style.css

// The width a tick label takes, so the left margin fits the longest ("83604.53" is never cut).
let measurer = null;
function textWidth(text) {
  measurer = measurer || document.createElement('canvas').getContext('2d');
  measurer.font = TICK_FONT;
  return measurer.measureText(text).width;
}

export class Chart {
  constructor(container, queryId) {
    this.container = container;
    this.queryId = queryId;
    this.columns = [];
    this.value = null;
    this.label = null;
    this.labels = [];
    this.data = { batches: [], series: {} };
    this.generation = 0;
    this.queue = Promise.resolve();
    this.render();
  }

  // The answer's columns (from a result page): choose defaults once.
  setColumns(columns, rows) {
    if (JSON.stringify(columns) === JSON.stringify(this.columns)) return this.update();
    this.columns = columns;
    this.label = columns.length > 1 ? columns[0] : null;
    this.value = columns.length > 1 ? columns[columns.length - 1] : columns[0];
    this.labels = this.label ? rows.slice(0, 4).map((r) => r[0]) : [];
    return this.reset();
  }

  toggleLabel(value) {
    if (!this.label) return;
    const i = this.labels.findIndex((x) => String(x) === String(value));
    if (i >= 0) this.labels.splice(i, 1); else this.labels.push(value);
    return this.reset();
  }

  reset() {
    this.generation += 1;
    this.data = { batches: [], series: {} };
    return this.update();
  }

  // Fetch the batches after the last one drawn; one fetch at a time, and a fetch started
  // before a reset (other columns or rows) is dropped.
  update() {
    this.queue = this.queue.then(() => this.fetchMore()).catch(() => this.render());
    return this.queue;
  }

  async fetchMore() {
    if (!this.value) { this.render(); return; }
    const generation = this.generation;
    const last = this.data.batches.length ? this.data.batches[this.data.batches.length - 1] : -1;
    const more = await api(`/api/queries/${this.queryId}/series`, {
      query: { value: this.value, label: this.label, labels: JSON.stringify(this.labels), first: last + 1 },
    });
    if (generation !== this.generation) return;
    this.data.batches.push(...more.batches);
    for (const [k, values] of Object.entries(more.series)) {
      this.data.series[k] = (this.data.series[k] || []).concat(values);
    }
    this.render();
  }

  render() {
    const pick = (name, options, current, set) => el('label', {}, name + ' ',
      el('select', { onchange: (e) => { set(e.target.value || null); this.reset(); } },
        options.map((o) => el('option', { value: o ?? '', selected: o === current }, o ?? '—'))));
    const controls = el('div', { class: 'chart-controls' },
      pick('value', this.columns, this.value, (v) => { this.value = v; }),
      pick('per row of', [null, ...this.columns], this.label, (v) => { this.label = v; this.labels = []; }),
      el('span', { class: 'hint', text: this.label ? 'click rows in the table to add or remove lines' : '' }));
    this.container.replaceChildren(controls, this.plot(), this.legend());
  }

  // The lines' names under the plot, never over its lines.
  legend() {
    return el('div', { class: 'chart-legend' }, Object.keys(this.data.series).map((name) =>
      el('span', { class: 'legend', style: `color:${colorFor(name)}` },
        el('span', { class: 'swatch', style: `background:${colorFor(name)}` }), ` ${this.label ? this.label + ' = ' : ''}${name}`)));
  }

  plot() {
    const { batches, series } = this.data;
    const root = svg('svg', { width: WIDTH, height: HEIGHT, class: 'chart' });
    const points = Object.values(series).flat().map(Number).filter((v) => Number.isFinite(v));
    if (!batches.length || !points.length) {
      root.append(svg('text', { x: 54, y: HEIGHT / 2, class: 'empty', text: 'no values yet' }));
      return root;
    }
    let lo = Math.min(...points), hi = Math.max(...points);
    if (lo === hi) { lo -= 1; hi += 1; }
    const ticks = [formatValue(hi), formatValue(lo)];
    const left = Math.ceil(Math.max(...ticks.map(textWidth))) + 10;
    const P = { ...PAD, l: Math.max(40, left) };
    const b0 = batches[0], b1 = Math.max(batches[batches.length - 1], b0 + 1);
    const x = (b) => P.l + (b - b0) / (b1 - b0) * (WIDTH - P.l - P.r);
    const y = (v) => P.t + (1 - (v - lo) / (hi - lo)) * (HEIGHT - P.t - P.b);
    root.append(svg('line', { x1: P.l, y1: HEIGHT - P.b, x2: WIDTH - P.r, y2: HEIGHT - P.b, class: 'axis' }));
    root.append(svg('line', { x1: P.l, y1: P.t, x2: P.l, y2: HEIGHT - P.b, class: 'axis' }));
    root.append(svg('text', { x: P.l - 4, y: P.t + 8, class: 'tick', 'text-anchor': 'end', text: ticks[0] }));
    root.append(svg('text', { x: P.l - 4, y: HEIGHT - P.b, class: 'tick', 'text-anchor': 'end', text: ticks[1] }));
    root.append(svg('text', { x: P.l, y: HEIGHT - 8, class: 'tick', text: `batch ${b0}` }));
    root.append(svg('text', { x: WIDTH - P.r, y: HEIGHT - 8, class: 'tick', 'text-anchor': 'end', text: `batch ${b1}` }));
    for (const [name, values] of Object.entries(series)) {
      const color = colorFor(name);
      const pts = values.map((v, i) => (v === null ? null : [x(batches[i]), y(Number(v))])).filter(Boolean);
      if (pts.length) {
        root.append(svg('polyline', { points: pts.map((p) => p.join(',')).join(' '), stroke: color, class: 'series' }));
        for (const [px, py] of pts) root.append(svg('circle', { cx: px, cy: py, r: 2.5, fill: color }));
      }
    }
    return root;
  }
}
