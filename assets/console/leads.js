// Leads: the table with the spec's filters, search and pagination, the stats by status as a
// bar chart (SVG), create, and one lead's page (status and priority, notes, activity log).

import { h, mount, field, input, textarea, select, button, loading, empty, errorBox,
  form, table, pager, debounce, confirm, dialog, header, section, badge, fmtDate, toast, attempt } from './ui.js';

const LIMIT = 25;
const STATUSES = ['new', 'contacted', 'qualified', 'converted'];
const PRIORITIES = ['low', 'medium', 'high'];

export async function render(main, ctx, params) {
  if (params[0]) return detail(main, ctx, params[0]);
  const { api } = ctx;
  const admin = ctx.adminMode ? { adminMode: true } : {};
  let offset = 0;
  const genies = await api.call('genies', 'list', null, { limit: 500, ...admin }).then((d) => d.genies).catch(() => []);
  const f = {
    searchTerm: input('searchTerm', '', { type: 'search', placeholder: 'Name, email or phone' }),
    status: select('status', [['', 'Any status'], ...STATUSES], ''),
    priority: select('priority', [['', 'Any priority'], ...PRIORITIES], ''),
    agentId: select('agentId', [['', 'Any genie'], ...genies.map((g) => [g.id, g.name])], ''),
    dateRange: select('dateRange', [['all', 'Any time'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days']], 'all'),
  };
  const chart = h('div', { id: 'lead-stats', class: 'chart' }, loading());
  const results = h('div', {}, loading());
  const filters = () => {
    const out = {};
    for (const [k, el] of Object.entries(f)) if (el.value.trim()) out[k] = el.value.trim();
    return out;
  };

  const loadStats = async () => {
    try {
      const { stats } = await api.call('leads', 'stats', null, { filters: filters(), ...admin });
      if (ctx.alive()) mount(chart, bars(stats));
    } catch (e) { mount(chart, errorBox(e)); }
  };
  const load = async () => {
    mount(results, loading());
    try {
      const d = await api.call('leads', 'all', null, { limit: LIMIT, offset, filters: filters(), ...admin });
      if (!ctx.alive()) return;
      if (!d.leads.length) {
        mount(results, empty(Object.keys(filters()).length > 1 ? 'No lead matches these filters.' : 'No leads yet.'));
        return;
      }
      mount(results, table([
        ['Name', (l) => h('a', { href: '/console/leads/' + l.id }, l.name || '(no name)')],
        ['Email', (l) => l.email || '—'],
        ['Phone', (l) => l.phone || '—'],
        ['Genie', (l) => l.agent?.name || '—'],
        ['Status', (l) => badge(l.status)],
        ['Priority', (l) => badge(l.priority)],
        ['Created', (l) => fmtDate(l.created_at)],
      ], d.leads, 'Leads'), pager(d.count, LIMIT, offset, (o) => { offset = o; load(); }));
    } catch (e) { mount(results, errorBox(e)); }
  };
  const refresh = () => { offset = 0; load(); loadStats(); };
  f.searchTerm.addEventListener('input', debounce(refresh));
  for (const k of ['status', 'priority', 'agentId', 'dateRange']) f[k].addEventListener('change', refresh);

  mount(main,
    header('Leads', ctx.readOnly ? null : button('New lead', () => create(ctx, genies), { class: 'primary', id: 'new-lead' })),
    section('By status', chart),
    h('div', { class: 'filters' }, field('Search', f.searchTerm), field('Status', f.status), field('Priority', f.priority), field('Genie', f.agentId), field('Created', f.dateRange)),
    results);
  await Promise.all([load(), loadStats()]);
}

/** A horizontal bar chart of the counts by status, drawn as SVG. */
function bars(stats) {
  const by = stats.by_status || {};
  const max = Math.max(1, ...STATUSES.map((s) => by[s] || 0));
  const row = 30;
  const svg = h('svg:svg', { viewBox: `0 0 400 ${row * STATUSES.length}`, role: 'img', 'aria-label': `Leads by status: ${STATUSES.map((s) => `${s} ${by[s] || 0}`).join(', ')}`, class: 'bars' },
    STATUSES.map((s, i) => h('svg:g', { 'data-status': s, 'data-count': by[s] || 0 },
      h('svg:text', { x: 0, y: i * row + 19, class: 'label' }, s),
      h('svg:rect', { x: 90, y: i * row + 6, height: 18, width: Math.max(2, ((by[s] || 0) / max) * 260), class: 'bar ' + s }),
      h('svg:text', { x: 95 + Math.max(2, ((by[s] || 0) / max) * 260), y: i * row + 19, class: 'value' }, String(by[s] || 0)))));
  return h('div', {}, svg, h('p', { class: 'muted' }, `${stats.total} ${stats.total === 1 ? 'lead' : 'leads'} in all`));
}

function leadFields(genies, l = {}) {
  return [
    l.id ? null : field('Genie', select('agent_id', [['', 'Choose a genie'], ...genies.map((g) => [g.id, g.name])], '', { required: true })),
    h('div', { class: 'grid' },
      field('Name', input('name', l.name)),
      field('Email', input('email', l.email, { type: 'email' })),
      field('Phone', input('phone', l.phone, { type: 'tel' })),
      field('Status', select('status', STATUSES, l.status || 'new')),
      field('Priority', select('priority', [['', 'None'], ...PRIORITIES], l.priority || '')),
      field('Budget', input('budget', l.budget)),
      field('Timeline', input('timeline', l.timeline)),
      field('Preferred contact', select('preferred_contact_method', [['', 'Any'], 'email', 'phone', 'sms'], l.preferred_contact_method || ''))),
    field('Notes', textarea('notes', l.notes, { rows: 3 })),
  ];
}

function clean(v) {
  const out = {};
  for (const [k, x] of Object.entries(v)) out[k] = x === '' ? null : x;
  return out;
}

function create(ctx, genies) {
  return dialog('New lead', (close) => form(leadFields(genies), 'Create lead', async (v) => {
    const { lead } = await ctx.api.call('leads', 'create', null, clean(v));
    toast('Lead created.');
    close(true);
    ctx.navigate('leads/' + lead.id);
  }, { id: 'lead-create' }));
}

async function detail(main, ctx, id) {
  const { api } = ctx;
  let lead;
  try { lead = (await api.call('leads', 'get', id)).lead; } catch (e) {
    mount(main, header('Lead'), errorBox(e), h('a', { href: '/console/leads' }, '← All leads'));
    return;
  }
  const ro = ctx.readOnly;
  const status = select('status', [['', 'None'], ...STATUSES], lead.status || '', { id: 'lead-status', disabled: ro });
  const priority = select('priority', [['', 'None'], ...PRIORITIES], lead.priority || '', { disabled: ro });
  const change = (name, el) => el.addEventListener('change', async () => {
    const r = await attempt(() => api.call('leads', 'update', lead.id, { [name]: el.value || null }), 'Saved.');
    if (r) { lead = r.lead; drawLog(); } else el.value = lead[name] || '';
  });
  change('status', status);
  change('priority', priority);
  const edit = form(leadFields([], lead).slice(1), 'Save details', async (v) => {
    const data = clean(v);
    delete data.status;
    delete data.priority;
    lead = (await api.call('leads', 'update', lead.id, data)).lead;
    toast('Saved.');
  });
  for (const el of edit.querySelectorAll('[name=status],[name=priority]')) el.closest('.field').remove();
  if (ro) for (const el of edit.elements) el.disabled = true;
  const notes = h('div', {});
  const log = h('div', { id: 'lead-log' });
  mount(main,
    h('p', {}, h('a', { href: '/console/leads' }, '← All leads')),
    header(lead.name || `Lead ${lead.id}`, ro ? null : button('Delete', async () => {
      if (!(await confirm('Delete this lead, its notes and its activity?'))) return;
      if (await attempt(() => api.call('leads', 'delete', lead.id), 'Lead deleted.')) ctx.navigate('leads');
    }, { class: 'danger' })),
    h('p', { class: 'muted' }, 'Genie: ', lead.agent?.name || '—', ' · created ', fmtDate(lead.created_at)),
    h('div', { class: 'inline' }, field('Status', status), field('Priority', priority)),
    h('div', { class: 'columns' }, section('Details', edit), h('div', {}, section('Notes', notes), section('Activity', log))));

  async function drawNotes() {
    try {
      const d = await api.call('lead-notes', 'list', null, { leadId: lead.id });
      const add = ro ? null : form([field('New note', textarea('content', '', { rows: 2 }))], 'Add note', async (v, f) => {
        await api.call('lead-notes', 'create', null, { leadId: lead.id, content: v.content });
        f.reset();
        drawNotes();
      });
      mount(notes, d.notes.length ? h('ul', { class: 'plain notes' }, d.notes.map((n) => h('li', {},
        h('p', {}, n.is_pinned ? '📌 ' : '', n.content),
        h('small', { class: 'muted' }, fmtDate(n.created_at)),
        ro ? null : h('span', { class: 'row-actions' },
          button(n.is_pinned ? 'Unpin' : 'Pin', async () => { if (await attempt(() => api.call('lead-notes', n.is_pinned ? 'unpin' : 'pin', n.id))) drawNotes(); }, { class: 'small' }),
          button('Delete', async () => { if (await confirm('Delete this note?') && await attempt(() => api.call('lead-notes', 'delete', n.id))) drawNotes(); }, { class: 'small danger' }))))) : empty('No notes yet.'), add);
    } catch (e) { mount(notes, errorBox(e)); }
  }
  async function drawLog() {
    try {
      const { activities } = await api.call('leads', 'getLogs', lead.id, { limit: 50 });
      mount(log, activities.length ? h('ol', { class: 'plain timeline' }, activities.map((a) => h('li', {},
        h('strong', {}, a.type), ' ', a.description || '', h('br'), h('small', { class: 'muted' }, fmtDate(a.created_at))))) : empty('No activity yet.'));
    } catch (e) { mount(log, errorBox(e)); }
  }
  await Promise.all([drawNotes(), drawLog()]);
}
