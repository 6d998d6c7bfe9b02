// Talking to the studio server: every request carries the token the page was served with
// (a header for HTTP, a query parameter for WebSockets; never a cookie).

const token = document.querySelector('meta[name="streamfold-token"]').content;

export class ApiError extends Error {
  constructor(error) {
    super(`[${error.code}] ${error.message}`);
    this.error = error;
  }
}

export async function api(path, { method = 'GET', body, query } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
  }
  const init = { method, headers: { 'X-Streamfold-Token': token } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(url, init);
  const data = await response.json();
  if (!response.ok) throw new ApiError(data.error || { code: 'HTTP_' + response.status, message: response.statusText });
  return data;
}

export function wsUrl(path, params = {}) {
  const url = new URL(path, location.origin);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('token', token);
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return url.toString();
}

export function wsBase(path) {
  const url = new URL(path, location.origin);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

export { token };

// A small DOM helper: el('div', {class: 'x', onclick: f}, child, 'text', ...)
export function el(tag, attrs = {}, ...children) {
  const node = tag === 'svg' || attrs.svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'svg' || v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  return el(tag, { ...attrs, svg: true }, ...children);
}

export function formatValue(v) {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number' && !Number.isInteger(v)) return String(Math.round(v * 1e6) / 1e6);
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
