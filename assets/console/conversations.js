// Conversations: the list with filters, sync from the voice platform, a conversation's
// transcript and analysis (run it again, make or update its lead).

import { h, mount, field, input, select, button, loading, empty, errorBox, table, pager, confirm,
  form, header, section, badge, fmtDate, toast, attempt } from './ui.js';

const LIMIT = 25;

export async function render(main, ctx, params) {
  if (params[0]) return detail(main, ctx, params[0]);
  const { api } = ctx;
  const admin = ctx.adminMode ? { adminMode: true } : {};
  let offset = 0;
  const genies = await api.call('genies', 'list', null, { limit: 500, ...admin }).then((d) => d.genies).catch(() => []);
  const f = {
    genieId: select('genieId', [['', 'Any genie'], ...genies.map((g) => [g.id, g.name])], ''),
    status: select('status', [['', 'Any status'], 'initiated', 'in-progress', 'processing', 'done', 'failed'], ''),
    channel: select('channel', [['', 'Any channel'], 'phone', 'web'], ''),
    dateRange: select('dateRange', [['all', 'Any time'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days']], 'all'),
  };
  const results = h('div', {}, loading());
  const load = async () => {
    mount(results, loading());
    try {
      const filters = {};
      for (const [k, el] of Object.entries(f)) if (el.value) filters[k] = el.value;
      const d = await api.call('conversations', 'list', null, { limit: LIMIT, offset, filters, ...admin });
      if (!ctx.alive()) return;
      mount(results, d.conversations.length ? [table([
        ['Started', (c) => h('a', { href: '/console/conversations/' + c.id }, fmtDate(c.started_at))],
        ['Genie', (c) => c.genie?.name || '—'],
        ['Channel', (c) => c.channel],
        ['Status', (c) => badge(c.status)],
        ['Duration', (c) => c.duration_seconds == null ? '—' : c.duration_seconds + ' s'],
        ['Turns', (c) => c.turn_count ?? '—'],
        ['Summary', (c) => c.summary || '—'],
      ], d.conversations, 'Conversations'), pager(d.count, LIMIT, offset, (o) => { offset = o; load(); })]
        : empty('No conversations yet. Calls and chats on public pages appear here.'));
    } catch (e) { mount(results, errorBox(e)); }
  };
  for (const el of Object.values(f)) el.addEventListener('change', () => { offset = 0; load(); });
  const sync = button('Sync from the voice platform', async () => {
    sync.disabled = true;
    const r = await attempt(() => api.call('conversations', 'sync', null, f.genieId.value ? { genieId: f.genieId.value } : {}));
    sync.disabled = false;
    if (r) {
      toast(`Synced: ${r.created} new, ${r.updated} updated, ${r.unchanged} unchanged.` + (r.errors?.length ? ` ${r.errors.length} genie(s) failed: ${r.errors.map((e) => e.message).join('; ')}` : ''), r.errors?.length ? 'error' : 'ok');
      load();
    }
  });
  mount(main,
    header('Conversations', ctx.readOnly ? null : sync),
    h('div', { class: 'filters' }, field('Genie', f.genieId), field('Status', f.status), field('Channel', f.channel), field('Started', f.dateRange)),
    results);
  await load();
}

async function detail(main, ctx, id) {
  const { api } = ctx;
  let c;
  try { c = (await api.call('conversations', 'get', id)).conversation; } catch (e) {
    mount(main, header('Conversation'), errorBox(e), h('a', { href: '/console/conversations' }, '← All conversations'));
    return;
  }
  const analysis = h('div', {});
  const drawAnalysis = () => {
    const a = c.analysis;
    mount(analysis, a ? h('dl', { class: 'facts' },
      h('dt', {}, 'Summary'), h('dd', {}, a.summary || '—'),
      h('dt', {}, 'Intent'), h('dd', {}, a.intent || '—'),
      h('dt', {}, 'Sentiment'), h('dd', {}, a.sentiment || '—'),
      h('dt', {}, 'Contact'), h('dd', {}, ['name', 'email', 'phone', 'budget', 'timeline'].map((k) => a.contact?.[k] ? `${k}: ${a.contact[k]}` : null).filter(Boolean).join(' · ') || '—'),
      h('dt', {}, 'Method'), h('dd', {}, a.method, a.model ? ` (${a.model})` : '', a.llm_error ? ` — ${a.llm_error}` : ''),
      h('dt', {}, 'Analysed'), h('dd', {}, fmtDate(a.analyzed_at))) : empty('Not analysed yet.'),
    ctx.readOnly ? null : button(a ? 'Analyse again' : 'Analyse', async () => {
      const r = await attempt(() => api.call('conversations', 'analyze', c.id, { createLead: true }));
      if (r) {
        c = r.conversation;
        toast(r.lead ? `Analysed; lead ${r.lead_action}.` : 'Analysed.');
        drawAnalysis();
      }
    }));
  };
  // Tags replace the list; metadata is merged member by member (an emptied value removes it).
  const labels = h('div', {});
  const drawLabels = () => {
    const meta = Object.entries(c.metadata || {});
    const rows = h('div', { class: 'pairs' });
    const addRow = (k = '', v = '') => rows.append(h('div', { class: 'grid' },
      field('Key', input('key', k, { readonly: !!k })), field('Value', input('value', typeof v === 'string' ? v : JSON.stringify(v)))));
    for (const [k, v] of meta) addRow(k, v);
    addRow();
    const f = form([
      field('Tags', input('tags', (c.tags || []).join(', '), { id: 'conv-tags' }), 'comma-separated'),
      h('h3', {}, 'Metadata'), rows,
      button('Add a member', () => addRow(), { class: 'small' }),
    ], 'Save', async () => {
      const keys = [...f.querySelectorAll('[name=key]')].map((e) => e.value.trim());
      const vals = [...f.querySelectorAll('[name=value]')].map((e) => e.value);
      const shown = (v) => (typeof v === 'string' ? v : JSON.stringify(v));
      const metadata = {};
      // Only what changed is sent, so values that are not strings keep their type.
      keys.forEach((k, i) => {
        if (!k || (k in (c.metadata || {}) && shown(c.metadata[k]) === vals[i])) return;
        metadata[k] = vals[i] === '' ? null : vals[i];
      });
      const tags = f.elements.tags.value.split(',').map((x) => x.trim()).filter(Boolean);
      c = (await api.call('conversations', 'update', c.id, { tags, metadata })).conversation;
      toast('Saved.');
      drawLabels();
    }, { id: 'labels-form' });
    if (ctx.readOnly) for (const el of f.elements) el.disabled = true;
    mount(labels, f);
  };
  const turns = c.transcript || [];
  mount(main,
    h('p', {}, h('a', { href: '/console/conversations' }, '← All conversations')),
    header(`${c.genie?.name || 'Conversation'} · ${fmtDate(c.started_at)}`,
      ctx.readOnly ? null : button('Delete', async () => {
        if (!(await confirm('Delete this conversation and its transcript?'))) return;
        if (await attempt(() => api.call('conversations', 'delete', c.id), 'Deleted.')) ctx.navigate('conversations');
      }, { class: 'danger' })),
    h('p', { class: 'muted' }, `${c.channel} · `, badge(c.status), c.duration_seconds != null ? ` · ${c.duration_seconds} s` : '', (c.tags || []).length ? ' · tags: ' + c.tags.join(', ') : ''),
    h('div', { class: 'columns' },
      section('Transcript', turns.length ? h('ol', { class: 'plain transcript' }, turns.map((t) => h('li', { class: 'turn ' + t.role },
        h('span', { class: 'who' }, t.role === 'agent' ? 'Genie' : 'Caller', t.time_in_call_secs != null ? ` · ${t.time_in_call_secs} s` : ''),
        h('p', {}, t.message ?? t.text ?? '')))) : empty('No transcript.')),
      h('div', {}, section('Analysis', analysis), section('Tags and metadata', labels))));
  drawAnalysis();
  drawLabels();
}
