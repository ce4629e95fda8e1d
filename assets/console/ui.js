// Small DOM helpers shared by the pages. Text always goes in as text nodes (never HTML), so
// nothing a record holds can run as code.

/** h('button', {class: 'x', onclick: fn, type: 'button'}, 'Save') */
export function h(tag, props, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value' && !svg) el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let uid = 0;
export const nextId = (p = 'f') => p + '-' + (++uid);

/** A labelled control: field('Name', h('input', {name: 'genieName'})) */
export function field(label, control, hint) {
  const id = control.id || nextId();
  control.id = id;
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint ? h('small', { class: 'hint' }, hint) : null);
}

export function input(name, value, props = {}) {
  return h('input', { name, value: value ?? '', ...props });
}

export function textarea(name, value, props = {}) {
  const t = h('textarea', { name, rows: 4, ...props });
  t.value = value ?? '';
  return t;
}

/** options: [[value, label]] or [value] */
export function select(name, options, value, props = {}) {
  const s = h('select', { name, ...props },
    options.map((o) => {
      const [v, l] = Array.isArray(o) ? o : [o, o];
      return h('option', { value: v }, l);
    }));
  s.value = value ?? '';
  return s;
}

export function checkbox(name, label, checked) {
  const id = nextId();
  return h('div', { class: 'field check' },
    h('input', { type: 'checkbox', name, id, checked }),
    h('label', { for: id }, label));
}

export function button(text, onclick, props = {}) {
  return h('button', { type: 'button', onclick, ...props }, text);
}

export function loading(text = 'Loading…') {
  return h('p', { class: 'loading', role: 'status' }, text);
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}

export function errorBox(err) {
  const msg = err && err.message ? err.message : String(err);
  return h('div', { class: 'error', role: 'alert' }, msg);
}

/** Messages that come and go, read out by screen readers. */
export function toast(msg, kind = 'ok') {
  let region = document.getElementById('toasts');
  if (!region) {
    region = h('div', { id: 'toasts', 'aria-live': 'polite' });
    document.body.append(region);
  }
  const t = h('div', { class: 'toast ' + kind, role: kind === 'error' ? 'alert' : 'status' }, msg);
  region.append(t);
  // At most three at once: the oldest goes first.
  while (region.children.length > 3) region.firstElementChild.remove();
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

/** Runs `fn`; a failure becomes a toast with the envelope's message. */
export async function attempt(fn, okText) {
  try {
    const r = await fn();
    if (okText) toast(okText);
    return r;
  } catch (e) {
    toast(e.message, 'error');
    return undefined;
  }
}

/** A modal dialog; `build(close)` returns its body. Resolves with what close() got. */
export function dialog(title, build) {
  return new Promise((resolve) => {
    const d = h('dialog', { class: 'dialog', 'aria-labelledby': nextId('dlg') });
    const titleId = d.getAttribute('aria-labelledby');
    let result;
    const close = (v) => { result = v; d.close(); };
    d.addEventListener('close', () => { d.remove(); resolve(result); });
    mount(d,
      h('div', { class: 'dialog-head' },
        h('h2', { id: titleId }, title),
        button('×', () => close(undefined), { class: 'icon', 'aria-label': 'Close' })),
      build(close));
    document.body.append(d);
    d.showModal();
  });
}

export function confirm(text, yes = 'Delete') {
  return dialog('Please confirm', (close) => h('div', {},
    h('p', {}, text),
    h('div', { class: 'actions' },
      button('Cancel', () => close(false)),
      button(yes, () => close(true), { class: 'danger', autofocus: true }))));
}

/**
 * A form whose submit runs `onsubmit(values)`; a failure shows the envelope's message next to
 * the field it names (`data.<name>`, `data.data.<name>`) or above the buttons.
 */
export function form(children, submitText, onsubmit, props = {}) {
  const status = h('div', { class: 'form-status', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'primary' }, submitText);
  const f = h('form', { novalidate: true, ...props }, children, status, h('div', { class: 'actions' }, submit));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(f);
    submit.disabled = true;
    status.textContent = 'Working…';
    try {
      await onsubmit(values(f), f);
      status.textContent = '';
    } catch (e) {
      status.textContent = '';
      showError(f, e);
    } finally {
      submit.disabled = false;
    }
  });
  return f;
}

export function values(f) {
  const out = {};
  for (const el of f.elements) {
    if (!el.name) continue;
    if (el.type === 'checkbox') out[el.name] = el.checked;
    else if (el.type === 'file') out[el.name] = el.files;
    else out[el.name] = el.value;
  }
  return out;
}

function clearErrors(f) {
  for (const e of f.querySelectorAll('.field-error, .error')) e.remove();
  for (const e of f.querySelectorAll('[aria-invalid]')) { e.removeAttribute('aria-invalid'); e.removeAttribute('aria-describedby'); }
}

const snake = (s) => s.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

export function showError(f, e) {
  const m = /^data\.(?:data\.|filters\.)?([A-Za-z_]+)/.exec(e.message || '');
  let target = null;
  if (m) {
    const n = m[1];
    for (const name of [n, snake(n), camel(n)]) {
      target = f.querySelector(`[name="${name}"]`);
      if (target) break;
    }
  }
  if (target) {
    const id = nextId('err');
    target.setAttribute('aria-invalid', 'true');
    target.setAttribute('aria-describedby', id);
    const msg = h('div', { class: 'field-error', id, role: 'alert' }, e.message);
    (target.closest('.field') || target).append(msg);
    target.focus();
  } else {
    f.querySelector('.actions').before(errorBox(e));
  }
}

export function fmtDate(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function badge(text, kind) {
  return h('span', { class: 'badge ' + (kind || String(text).replace(/[^a-z_-]/gi, '')) }, text ?? '—');
}

/** A table; columns: [[header, row => cell]]. */
export function table(columns, rows, caption) {
  return h('div', { class: 'table-wrap' }, h('table', {},
    caption ? h('caption', { class: 'sr-only' }, caption) : null,
    h('thead', {}, h('tr', {}, columns.map(([t]) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, columns.map(([t, f]) => h('td', { 'data-label': t }, f(r))))))));
}

/** Previous/next for offset lists. */
export function pager(total, limit, offset, go) {
  const page = Math.floor(offset / limit) + 1;
  const pages = Math.max(1, Math.ceil(total / limit));
  return h('nav', { class: 'pager', 'aria-label': 'Pages' },
    button('← Previous', () => go(Math.max(0, offset - limit)), { disabled: offset <= 0 }),
    h('span', {}, `Page ${page} of ${pages} · ${total} in all`),
    button('Next →', () => go(offset + limit), { disabled: offset + limit >= total }));
}

export function debounce(fn, ms = 300) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

/** Copies text; falls back to selecting it. */
export async function copy(text, el) {
  try {
    await navigator.clipboard.writeText(text);
    toast('Copied to the clipboard.');
  } catch {
    if (el) { el.focus(); el.select?.(); }
    toast('Select the text and copy it (Ctrl+C).', 'error');
  }
}

/** A page heading with actions at the right. */
export function header(title, ...actions) {
  return h('div', { class: 'page-head' }, h('h1', { tabindex: '-1' }, title), h('div', { class: 'actions' }, actions));
}

export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), children);
}
