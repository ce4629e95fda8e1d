// Genies: the list (search, groups, order), create, and one genie's page (prompt, first
// message, voice, conversation settings, documents, phone, public page and QR code, clone,
// delete; versions, traffic and tests come from versions.js).

import { h, mount, field, input, textarea, select, checkbox, button, loading, empty, errorBox,
  form, table, pager, debounce, confirm, dialog, header, section, badge, fmtDate, toast, attempt } from './ui.js';
import { versionsSection } from './versions.js';

const LIMIT = 20;

export async function render(main, ctx, params) {
  if (params[0]) return detail(main, ctx, params[0]);
  return list(main, ctx);
}

async function list(main, ctx) {
  const { api } = ctx;
  let offset = 0;
  let groups = [];
  const search = input('searchTerm', '', { type: 'search', placeholder: 'Search by name' });
  const group = select('groupId', [['', 'All groups']], '');
  const results = h('div', {}, loading());
  const admin = ctx.adminMode ? { adminMode: true } : {};

  const load = async () => {
    mount(results, loading());
    try {
      const filters = {};
      if (search.value.trim()) filters.searchTerm = search.value.trim();
      if (group.value) filters.groupId = group.value;
      const d = await api.call('genies', 'list', null, { limit: LIMIT, offset, filters, ...admin });
      if (!ctx.alive()) return;
      if (!d.genies.length) {
        mount(results, empty(search.value || group.value ? 'No genie matches.' : 'No genies yet. Create the first one.'));
        return;
      }
      const gname = (id) => groups.find((g) => g.id === id)?.name || '—';
      const move = (i, dir) => async () => {
        const rows = d.genies.slice();
        const j = i + dir;
        if (j < 0 || j >= rows.length) return;
        [rows[i], rows[j]] = [rows[j], rows[i]];
        const sort = {};
        rows.forEach((g, k) => { sort[g.id] = offset + k; });
        if (await attempt(() => api.call('genies', 'reorder', null, { sort }))) load();
      };
      const cols = [
        ['Name', (g) => h('a', { href: '/console/genies/' + g.id }, g.name)],
        ['Category', (g) => g.category || '—'],
        ['Group', (g) => gname(g.group_id)],
        ['Status', (g) => badge(g.is_active ? 'active' : 'inactive')],
        ['Updated', (g) => fmtDate(g.updated_at)],
      ];
      if (!ctx.readOnly) {
        cols.push(['Order', (g) => {
          const i = d.genies.indexOf(g);
          return h('span', { class: 'order' },
            button('↑', move(i, -1), { class: 'icon', 'aria-label': 'Move ' + g.name + ' up', disabled: i === 0 }),
            button('↓', move(i, 1), { class: 'icon', 'aria-label': 'Move ' + g.name + ' down', disabled: i === d.genies.length - 1 }));
        }]);
      }
      mount(results, table(cols, d.genies, 'Genies'), pager(d.total, LIMIT, offset, (o) => { offset = o; load(); }));
    } catch (e) {
      mount(results, errorBox(e));
    }
  };

  const loadGroups = async () => {
    try {
      groups = (await api.call('genie-groups', 'list')).groups;
      mount(group, h('option', { value: '' }, 'All groups'), groups.map((g) => h('option', { value: g.id }, `${g.name} (${g.agent_count})`)));
    } catch { groups = []; }
  };

  search.addEventListener('input', debounce(() => { offset = 0; load(); }));
  group.addEventListener('change', () => { offset = 0; load(); });

  mount(main,
    header('Genies',
      ctx.readOnly ? null : button('New group', () => newGroup(ctx).then((ok) => ok && loadGroups())),
      ctx.readOnly ? null : button('New genie', () => create(ctx, groups), { class: 'primary', id: 'new-genie' })),
    h('div', { class: 'filters' }, field('Search', search), field('Group', group)),
    results);
  await loadGroups();
  await load();
}

function newGroup(ctx) {
  return dialog('New group', (close) => form([
    field('Name', input('name', '', { required: true, maxlength: 100 })),
    field('Description', input('description', '')),
  ], 'Create group', async (v) => {
    await ctx.api.call('genie-groups', 'create', null, { name: v.name, description: v.description || null });
    toast('Group created.');
    close(true);
  }));
}

function create(ctx, groups) {
  return dialog('New genie', (close) => form([
    field('Name', input('genieName', '', { required: true, maxlength: 200 })),
    field('Description', input('description', '')),
    field('Use case', input('useCase', '', { placeholder: 'e.g. front desk, bookings' })),
    field('Category', input('category', '')),
    field('System prompt', textarea('systemPrompt', '', { rows: 5 })),
    field('First message', textarea('firstMessage', '', { rows: 2 })),
    field('Group', select('groupId', [['', 'No group'], ...groups.map((g) => [g.id, g.name])], '')),
    field('Temperature', input('temperature', '', { type: 'number', step: '0.1', inputmode: 'decimal' }), '0 to 2'),
  ], 'Create genie', async (v) => {
    const data = { genieName: v.genieName };
    for (const k of ['description', 'useCase', 'category', 'systemPrompt', 'firstMessage', 'groupId']) if (v[k]) data[k] = v[k];
    if (v.temperature !== '') data.temperature = Number(v.temperature);
    const { genie } = await ctx.api.call('genies', 'create', null, data);
    toast(`Genie “${genie.name}” created.`);
    close(true);
    ctx.navigate('genies/' + genie.id);
  }, { id: 'genie-create' }));
}

async function detail(main, ctx, id) {
  const { api } = ctx;
  const admin = ctx.adminMode ? { adminMode: true } : {};
  let g;
  try {
    g = (await api.call('genies', 'get', id, admin)).genie;
  } catch (e) {
    mount(main, header('Genie'), errorBox(e), h('a', { href: '/console/genies' }, '← All genies'));
    return;
  }
  if (!ctx.alive()) return;
  const [voices, groups] = await Promise.all([
    api.call('voices', 'list', null, { limit: 500 }).then((d) => d.voices).catch(() => []),
    api.call('genie-groups', 'list').then((d) => d.groups).catch(() => []),
  ]);
  const ro = ctx.readOnly;
  const voiceOpts = voices.map((v) => [v.voice_id, `${v.name}${v.language ? ' · ' + v.language : ''}`]);
  if (!voiceOpts.some(([v]) => v === g.voice_id)) voiceOpts.unshift([g.voice_id, g.voice_id]);

  const settingsForm = form([
    field('Name', input('name', g.name, { required: true, maxlength: 200 })),
    field('Description', input('description', g.description)),
    field('Category', input('category', g.category)),
    field('Group', select('group_id', [['', 'No group'], ...groups.map((x) => [x.id, x.name])], g.group?.id || '')),
    field('System prompt', textarea('system_prompt', g.system_prompt, { rows: 8 })),
    field('First message', textarea('first_message', g.first_message, { rows: 2 })),
    field('Web page welcome message', input('web_welcome_message', g.page?.welcome_message)),
    h('div', { class: 'grid' },
      field('Voice', select('voice_id', voiceOpts, g.voice_id)),
      field('Language', input('language', g.settings?.conversation_config?.agent?.language, { placeholder: 'e.g. en' })),
      field('LLM model', input('llm_model', g.llm_model)),
      field('Temperature', input('temperature', g.temperature, { type: 'number', step: '0.1' }), '0 to 2'),
      field('Max tokens', input('max_tokens', g.max_tokens, { type: 'number', min: 1 })),
      field('Max call duration (s)', input('max_duration_seconds', g.max_duration_seconds, { type: 'number', min: 1 })),
      field('Turn timeout (s)', input('turn_timeout_seconds', g.turn_timeout_seconds, { type: 'number', step: 'any' })),
      field('End call after silence (s)', input('silence_end_seconds', g.silence_end_seconds, { type: 'number', step: 'any' })),
      field('Turn mode', select('turn_mode', [['silence', 'silence'], ['turn', 'turn']], g.turn_mode || 'silence'))),
    checkbox('is_active', 'Active', g.is_active),
    checkbox('send_conversation_reports', 'Email conversation reports', g.send_conversation_reports),
    field('Report addresses', input('support_emails', (g.support_emails || []).join(', ')), 'comma-separated'),
  ], 'Save changes', async (v) => {
    const data = {};
    const num = ['temperature', 'max_tokens', 'max_duration_seconds', 'turn_timeout_seconds', 'silence_end_seconds'];
    const text = ['name', 'description', 'category', 'system_prompt', 'first_message', 'web_welcome_message', 'voice_id', 'llm_model', 'turn_mode', 'language'];
    const cur = { ...g, web_welcome_message: g.page?.welcome_message, language: g.settings?.conversation_config?.agent?.language };
    for (const k of text) if ((v[k] || null) !== (cur[k] ?? null)) data[k] = v[k] === '' && k !== 'name' ? null : v[k];
    for (const k of num) {
      const n = v[k] === '' ? null : Number(v[k]);
      if (n !== (cur[k] ?? null)) data[k] = n;
    }
    if ((v.group_id || null) !== (g.group?.id || null)) data.group_id = v.group_id || null;
    for (const k of ['is_active', 'send_conversation_reports']) if (v[k] !== !!g[k]) data[k] = v[k];
    const emails = v.support_emails.split(',').map((s) => s.trim()).filter(Boolean);
    if (emails.join(',') !== (g.support_emails || []).join(',')) data.support_emails = emails;
    if (!Object.keys(data).length) { toast('Nothing changed.'); return; }
    g = (await api.call('genies', 'update', g.id, { ...data, ...admin })).genie;
    toast('Saved.');
  }, { id: 'genie-form' });
  if (ro) for (const el of settingsForm.elements) el.disabled = true;

  const docs = h('div', {});
  const page = h('div', {});
  const phone = h('div', {});
  mount(main,
    h('p', {}, h('a', { href: '/console/genies' }, '← All genies')),
    header(g.name,
      ro ? null : button('Clone', () => clone(ctx, g)),
      ro ? null : button('Delete', async () => {
        if (!(await confirm(`Delete the genie “${g.name}”? Its phone number is released and its page stops working.`))) return;
        if (await attempt(() => api.call('genies', 'delete', g.id, admin), 'Genie deleted.')) ctx.navigate('genies');
      }, { class: 'danger' })),
    g.owner ? h('p', { class: 'muted' }, 'Owner: ', g.owner.full_name || '', ' <', g.owner.email, '>') : null,
    h('div', { class: 'columns' },
      section('Settings', settingsForm),
      h('div', {}, section('Public page', page), section('Documents', docs), section('Phone number', phone),
        ro ? null : section('Sharing', sharing()))),
    section('Versions, traffic and tests', versionsSection(ctx, g, () => ctx.navigate('genies/' + g.id, true))));

  // `assign` gives a consumer account read access to this genie; the API knows users by id.
  function sharing() {
    const out = h('div', { 'aria-live': 'polite' });
    const act = (verb) => async (v) => {
      const r = await api.call('genies', verb, g.id, { userId: v.userId.trim(), ...admin });
      mount(out, h('p', {}, r.assigned ? 'Shared with ' : 'No longer shared with ', h('code', {}, r.user_id), '.'));
    };
    return h('div', {},
      h('p', { class: 'muted' }, 'Give a consumer account read access to this genie (its conversations and leads stay yours).'),
      form([field('User id', input('userId', '', { required: true, placeholder: 'the consumer’s user id', autocomplete: 'off' }))], 'Share', act('assign'), { id: 'assign-form' }),
      form([field('User id', input('userId', '', { required: true, autocomplete: 'off' }))], 'Stop sharing', act('unassign'), { id: 'unassign-form' }),
      out);
  }

  const reload = async () => { g = (await api.call('genies', 'get', g.id, admin)).genie; };
  const drawDocs = async () => {
    const attached = g.documents || [];
    const list = attached.length ? h('ul', { class: 'plain' }, attached.map((d) => h('li', {},
      h('span', {}, d.name, ' '), badge(d.status),
      ro ? null : button('Detach', async () => {
        if (await attempt(() => api.call('knowledge-base', 'detach', null, { agentId: g.id, documentIds: [d.id] }), 'Detached.')) { await reload(); drawDocs(); }
      }, { class: 'small', 'aria-label': 'Detach ' + d.name })))) : empty('No documents attached.');
    let picker = null;
    if (!ro) {
      const all = await api.call('knowledge-base', 'all', null, { limit: 200 }).then((x) => x.documents).catch(() => []);
      const free = all.filter((d) => !attached.some((a) => a.id === d.id));
      const sel = select('document', [['', free.length ? 'Choose a document' : 'No other documents'], ...free.map((d) => [d.id, `${d.name} (${d.status})`])], '', { id: 'attach-doc' });
      picker = h('div', { class: 'inline' }, field('Attach a document', sel), button('Attach', async () => {
        const d = free.find((x) => x.id === sel.value);
        if (!d) return;
        const type = d.type === 'text' ? 'text' : ['url', 'website', 'youtube'].includes(d.type) ? 'url' : 'file';
        if (await attempt(() => api.call('knowledge-base', 'attach', null, { agentId: g.id, documents: [{ id: d.id, name: d.name, type }] }), 'Attached.')) { await reload(); drawDocs(); }
      }, { id: 'attach-btn' }));
    }
    mount(docs, list, picker);
  };
  const drawPhone = () => {
    mount(phone, g.phone ? h('p', {}, h('strong', {}, g.phone.number), ' ', badge(g.phone.status)) : empty('No phone number.'),
      ro ? null : g.phone
        ? button('Release number', async () => {
          if (!(await confirm(`Release ${g.phone.number}? Callers can no longer reach this genie on it.`, 'Release'))) return;
          const r = await attempt(() => api.call('genies', 'release-phone', g.id, admin), 'Number released.');
          if (r) { g = r.genie; drawPhone(); }
        })
        : button('Get a phone number', async () => {
          const r = await attempt(() => api.call('genies', 'attach-phone', g.id, admin), 'Number attached.');
          if (r) { g = r.genie; drawPhone(); }
        }));
  };
  const drawPage = async () => {
    const url = g.page?.url;
    if (!url) { mount(page, empty('This genie has no public page.')); return; }
    const img = h('img', { class: 'qr', alt: 'QR code of the public page', width: 160, height: 160 });
    mount(page,
      h('p', {}, h('a', { href: url, target: '_blank', rel: 'noopener', id: 'page-link' }, url)),
      g.page.warning ? h('p', { class: 'notice' }, g.page.warning) : null,
      img);
    if (ro) { img.remove(); return; }
    try {
      const codes = (await api.call('qr-code', 'all', null, { genie_id: g.id })).qr_codes;
      const code = codes[0] || (await api.call('qr-code', 'create', null, { genie_id: g.id, label: 'Console' })).qr_code;
      const blob = await api.blob(`/v1/qr-code/${code.id}/image.svg`);
      img.src = URL.createObjectURL(blob);
      page.append(h('p', {}, h('a', { href: img.src, download: `${g.page.slug}.svg`, onclick: () => api.call('qr-code', 'increment-download', code.id).catch(() => {}) }, 'Download the QR code')));
    } catch (e) {
      img.replaceWith(errorBox(e));
    }
  };
  drawPhone();
  await Promise.all([drawDocs(), drawPage()]);
}

function clone(ctx, g) {
  const pairs = h('div', { class: 'pairs' });
  const addPair = () => pairs.append(h('div', { class: 'grid' },
    field('Replace', input('from', '')), field('With', input('to', ''))));
  addPair();
  return dialog('Clone ' + g.name, (close) => form([
    field('Name of the copy', input('name', 'Copy of ' + g.name, { required: true })),
    h('p', { class: 'muted' }, 'Replacements apply to the system prompt and the first message, in order.'),
    pairs,
    button('Add a replacement', addPair),
  ], 'Clone', async (v, f) => {
    const froms = [...f.querySelectorAll('[name=from]')].map((e) => e.value);
    const tos = [...f.querySelectorAll('[name=to]')].map((e) => e.value);
    const promptReplacements = froms.map((from, i) => ({ from, to: tos[i] })).filter((p) => p.from);
    const { genie } = await ctx.api.call('genies', 'clone', g.id, { name: v.name, promptReplacements });
    toast('Cloned.');
    close(true);
    ctx.navigate('genies/' + genie.id);
  }));
}
