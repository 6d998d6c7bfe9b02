// The incremental plan drawn as a graph (the server places the nodes in layers and rows):
// sources → steps of h → states → the answer, each node with its rows after the last batch.

import { svg } from './api.js';

const W = 150, H = 50, GAP_X = 36, GAP_Y = 22, PAD = 8;

export function drawGraph(container, graph, commit) {
  container.replaceChildren();
  if (!graph) return;
  const at = (n) => ({ x: PAD + n.layer * (W + GAP_X), y: PAD + n.row * (H + GAP_Y) });
  const layers = Math.max(...graph.nodes.map((n) => n.layer)) + 1;
  const rows = Math.max(...graph.nodes.map((n) => n.row)) + 1;
  const root = svg('svg', {
    width: PAD * 2 + layers * W + (layers - 1) * GAP_X, height: PAD * 2 + rows * H + (rows - 1) * GAP_Y,
    class: 'plan-graph',
  });
  root.append(svg('defs', {}, svg('marker', {
    id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse',
  }, svg('path', { d: 'M 0 0 L 10 5 L 0 10 z' }))));
  const byId = Object.fromEntries(graph.nodes.map((n) => [n.id, n]));
  for (const e of graph.edges) {
    const a = at(byId[e.from]), b = at(byId[e.to]);
    let d;
    if (e.kind === 'old') { // a read of the state as it was: drawn back, under the boxes
      const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y + H;
      const dip = Math.max(y1, y2) + GAP_Y * 0.8;
      d = `M ${x1} ${y1} C ${x1} ${dip}, ${x2} ${dip}, ${x2} ${y2}`;
    } else {
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mid = (x1 + x2) / 2;
      d = `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`;
    }
    root.append(svg('path', { d, class: `edge edge-${e.kind}`, 'marker-end': 'url(#arrow)' },
      svg('title', { text: `${e.from} → ${e.to} (${e.kind})` })));
  }
  for (const n of graph.nodes) {
    const { x, y } = at(n);
    const count = nodeCount(n, commit);
    root.append(svg('g', { class: `node node-${n.kind}`, 'data-node': n.id, transform: `translate(${x},${y})` },
      svg('rect', { width: W, height: H, rx: 6 }),
      svg('text', { x: 8, y: 17, class: 'node-label', text: n.label }),
      svg('text', { x: 8, y: 31, class: 'node-detail', text: clip(n.detail, 25) }),
      svg('text', { x: 8, y: 44, class: 'node-count', text: count }),
      svg('title', { text: `${n.label}\n${n.detail}` })));
  }
  container.append(root);
}

// The live row count of a node after the last committed batch.
function nodeCount(n, commit) {
  if (!commit) return '';
  const name = n.label.replace(/^Δ/, '');
  if (n.kind === 'source') {
    const rows = lookup(commit.rows, name);
    return rows === undefined ? '' : `+${rows.toLocaleString()} rows in batch ${commit.batch}`;
  }
  if (n.kind === 'state') {
    const rows = lookup(commit.state_rows, name);
    return rows === undefined ? '' : `${rows.toLocaleString()} rows`;
  }
  if (n.kind === 'answer') {
    return `${(commit.snapshot_rows ?? 0).toLocaleString()} rows, ${(commit.change_rows ?? 0).toLocaleString()} in changes`;
  }
  return '';
}

function lookup(map, name) {
  if (!map) return undefined;
  for (const [k, v] of Object.entries(map)) if (k.toLowerCase() === name.toLowerCase()) return v;
  return undefined;
}

function clip(text, n) {
  return text.length > n ? text.slice(0, n - 1) + '…' : text;
}
