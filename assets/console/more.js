// The smaller pages: worker genies, webhooks, teams, the activity log, voices, marketplace,
// the user's profile and (for internal admins) the users page.

import { h, mount, field, input, textarea, select, checkbox, button, loading, empty, errorBox,
  form, table, pager, debounce, confirm, dialog, header, section, badge, fmtDate, toast, attempt, copy } from './ui.js';

const EVENTS = ['genie.created', 'genie.updated', 'genie.deleted', 'document.completed', 'document.failed', 'lead.created', 'lead.updated', 'lead.status_changed', 'conversation.completed', 'conversation.analyzed', 'worker_run.succeeded', 'worker_run.failed', 'api_key.created', 'api_key.revoked'];

/** A secret shown once; `Done` (or leaving the page) removes it. */
function once(label, value) {
  const box = h('input', { readonly: true, value, class: 'secret', 'aria-label': label });
  const wrap = h('div', { class: 'card reveal' },
    h('p', {}, h('strong', {}, label + ': '), 'shown only once.'),
    h('div', { class: 'inline' }, box, button('Copy', () => copy(box.value, box)), button('Done', () => { box.value = ''; wrap.remove(); })));
  return wrap;
}

const guarded = async (el, fn) => { try { await fn(); } catch (e) { mount(el, errorBox(e)); } };

// ---- worker genies -------------------------------------------------------------------------

export const workers = {
  async render(main, ctx, params) {
    const { api } = ctx;
    if (params[0]) return workerDetail(main, ctx, params[0]);
    const list = h('div', {}, loading());
    const creds = h('div', {}, loading());
    const load = () => guarded(list, async () => {
      const d = await api.call('worker-genies', 'list');
      mount(list, d.items.length ? table([
        ['Name', (w) => h('a', { href: '/console/workers/' + w.id }, w.name)],
        ['Trigger', (w) => w.trigger_type + (w.schedule ? ` (${w.schedule} ${w.timezone})` : '') + (w.event_type ? ` (${w.event_type})` : '')],
        ['Active', (w) => badge(w.is_active ? 'active' : 'inactive')],
        ['Updated', (w) => fmtDate(w.updated_at)],
      ], d.items, 'Worker genies') : empty('No worker genies yet.'));
    });
    const loadCreds = () => guarded(creds, async () => {
      const d = await api.call('worker-genies', 'list-credentials');
      mount(creds, d.items.length ? table([
        ['Name', (c) => c.name], ['Type', (c) => c.credential_type], ['URL prefix', (c) => c.url_prefix || 'any URL'],
        ['', (c) => ctx.readOnly ? null : button('Delete', async () => {
          if (await confirm(`Delete the credential “${c.name}”?`) && await attempt(() => api.call('worker-genies', 'delete-credential', c.id), 'Deleted.')) loadCreds();
        }, { class: 'small danger' })],
      ], d.items, 'Credentials') : empty('No credentials stored.'),
      ctx.readOnly ? null : form([
        h('div', { class: 'grid' },
          field('Name', input('name', '', { required: true })),
          field('Type', select('credential_type', ['bearer_token', 'api_key', 'basic_auth'], 'bearer_token')),
          field('URL prefix', input('url_prefix', '', { placeholder: 'https://api.example.com/' })),
          field('Header (api_key)', input('header_name', '', { placeholder: 'X-API-Key' }))),
        field('Value', input('value', '', { type: 'password', autocomplete: 'off', required: true }), 'Stored encrypted; never shown again.'),
      ], 'Store credential', async (v, f) => {
        const data = { name: v.name, credential_type: v.credential_type, value: v.value };
        if (v.url_prefix) data.url_prefix = v.url_prefix;
        if (v.header_name) data.header_name = v.header_name;
        f.elements.value.value = '';
        await api.call('worker-genies', 'store-credential', null, data);
        f.reset();
        toast('Credential stored.');
        loadCreds();
      }));
    });
    mount(main, header('Worker genies', ctx.readOnly ? null : button('New worker genie', () => workerForm(ctx, null).then((w) => w && ctx.navigate('workers/' + w.id)), { class: 'primary' })),
      list, section('Credentials', creds));
    await Promise.all([load(), loadCreds()]);
  },
};

function workerForm(ctx, w) {
  return dialog(w ? 'Edit ' + w.name : 'New worker genie', (close) => form([
    field('Name', input('name', w?.name, { required: true })),
    field('Instructions', textarea('soul_prompt', w?.soul_prompt, { rows: 6, required: true })),
    h('div', { class: 'grid' },
      field('Trigger', select('trigger_type', ['manual', 'schedule', 'event'], w?.trigger_type || 'manual')),
      field('Schedule (cron)', input('schedule', w?.schedule, { placeholder: '0 9 * * 1-5' })),
      field('Time zone', input('timezone', w?.timezone || 'UTC')),
      field('Event', select('event_type', [['', '—'], ...EVENTS], w?.event_type || '')),
      field('Max steps', input('max_steps', w?.max_steps ?? 10, { type: 'number', min: 1, max: 50 })),
      field('LLM model', input('llm_model', w?.llm_model))),
    field('Credentials (names)', input('credential_refs', (w?.credential_refs || []).join(', ')), 'comma-separated'),
    checkbox('is_active', 'Active', w ? w.is_active : true),
  ], w ? 'Save' : 'Create', async (v) => {
    const data = { name: v.name, soul_prompt: v.soul_prompt, trigger_type: v.trigger_type, timezone: v.timezone || 'UTC', is_active: v.is_active, max_steps: Number(v.max_steps) || 10, llm_model: v.llm_model || null, credential_refs: v.credential_refs.split(',').map((s) => s.trim()).filter(Boolean) };
    if (v.trigger_type === 'schedule') data.schedule = v.schedule;
    if (v.trigger_type === 'event') data.event_type = v.event_type;
    const r = w ? await ctx.api.call('worker-genies', 'update', w.id, data) : await ctx.api.call('worker-genies', 'create', null, data);
    toast('Saved.');
    close(r.worker_genie);
  }));
}

async function workerDetail(main, ctx, id) {
  const { api } = ctx;
  const d = await api.call('worker-genies', 'get', id);
  const w = d.worker_genie;
  const runs = h('div', {});
  const loadRuns = () => guarded(runs, async () => {
    const r = await api.call('worker-genies', 'runs', w.id, { limit: 20 });
    mount(runs, r.items.length ? h('ul', { class: 'plain runs' }, r.items.map((run) => h('li', {},
      h('details', {}, h('summary', {}, badge(run.status), ' ', run.trigger, ' · ', fmtDate(run.created_at), run.duration_ms != null ? ` · ${run.duration_ms} ms` : ''),
        run.error ? h('p', { class: 'error-text' }, run.error) : null,
        run.output ? h('pre', {}, run.output) : null,
        (run.steps || []).length ? h('ol', {}, run.steps.map((s) => h('li', {}, s.type === 'llm' ? `model turn ${s.turn}: ${(s.content || '').slice(0, 300)} ${(s.tool_calls || []).map((t) => t.name).join(', ')}` : `tool ${s.tool}: ${s.ok ? 'ok' : 'failed'}`))) : null,
        ['queued', 'running'].includes(run.status) && !ctx.readOnly ? button('Cancel', async () => { if (await attempt(() => api.call('worker-genies', 'cancel', run.id))) loadRuns(); }, { class: 'small' }) : null)))) : empty('No runs yet.'));
  });
  mount(main, h('p', {}, h('a', { href: '/console/workers' }, '← All worker genies')),
    header(w.name,
      ctx.readOnly ? null : button('Run now', async () => { if (await attempt(() => api.call('worker-genies', 'run', w.id, {}), 'Run queued.')) loadRuns(); }, { class: 'primary' }),
      ctx.readOnly ? null : button('Edit', () => workerForm(ctx, w).then((x) => x && ctx.navigate('workers/' + w.id, true))),
      ctx.readOnly ? null : button('Delete', async () => {
        if (await confirm(`Delete “${w.name}” and its runs?`) && await attempt(() => api.call('worker-genies', 'delete', w.id), 'Deleted.')) ctx.navigate('workers');
      }, { class: 'danger' })),
    h('p', { class: 'muted' }, `Trigger: ${w.trigger_type}`, w.schedule ? ` ${w.schedule} (${w.timezone})` : '', w.event_type ? ` ${w.event_type}` : ''),
    section('Instructions', h('pre', { class: 'wrap' }, w.soul_prompt)),
    section('Runs', button('Refresh', loadRuns, { class: 'small' }), runs));
  await loadRuns();
}

// ---- webhooks --------------------------------------------------------------------------------

export const webhooks = {
  async render(main, ctx) {
    const { api } = ctx;
    const list = h('div', {}, loading());
    const reveal = h('div', {});
    const deliveries = h('div', {});
    const showDeliveries = (w, offset = 0) => guarded(deliveries, async () => {
      const d = await api.call('webhooks', 'deliveries', w.id, { limit: 20, offset });
      mount(deliveries, h('h3', {}, 'Deliveries to ', w.url), d.deliveries.length ? table([
        ['Event', (x) => x.event_type], ['Status', (x) => badge(x.status)], ['Attempts', (x) => x.attempts],
        ['Last answer', (x) => x.last_status_code ?? x.last_error ?? '—'], ['At', (x) => fmtDate(x.updated_at)],
        ['', (x) => button('Redeliver', async () => { if (await attempt(() => api.call('webhooks', 'redeliver', x.id), 'Queued again.')) showDeliveries(w); }, { class: 'small' })],
      ], d.deliveries, 'Deliveries') : empty('No deliveries yet.'), pager(d.count, 20, offset, (o) => showDeliveries(w, o)));
    });
    const load = () => guarded(list, async () => {
      const d = await api.call('webhooks', 'list');
      mount(list, d.webhooks.length ? table([
        ['Address', (w) => w.url], ['Events', (w) => w.event_types.join(', ')],
        ['Active', (w) => h('span', {}, badge(w.is_active ? 'active' : 'disabled'), w.disabled_reason ? h('small', {}, ' ', w.disabled_reason) : null)],
        ['', (w) => h('span', { class: 'row-actions' },
          button('Deliveries', () => showDeliveries(w), { class: 'small' }),
          button('Test', async () => { const r = await attempt(() => api.call('webhooks', 'test', w.id)); if (r) toast(r.result.succeeded ? `Delivered (${r.result.status_code}, ${r.result.latency_ms} ms).` : `Failed: ${r.result.error || r.result.status_code}`, r.result.succeeded ? 'ok' : 'error'); }, { class: 'small' }),
          ctx.readOnly ? null : button('Rotate secret', async () => {
            if (!(await confirm(`Rotate the signing secret of ${w.url}? The old secret stops signing at once.`, 'Rotate'))) return;
            const r = await attempt(() => api.call('webhooks', 'rotate-secret', w.id));
            if (r) mount(reveal, once('New signing secret', r.secret));
          }, { class: 'small' }),
          button(w.is_active ? 'Disable' : 'Enable', async () => { if (await attempt(() => api.call('webhooks', 'update', w.id, { is_active: !w.is_active }))) load(); }, { class: 'small' }),
          button('Delete', async () => { if (await confirm(`Delete the webhook to ${w.url}?`) && await attempt(() => api.call('webhooks', 'delete', w.id), 'Deleted.')) load(); }, { class: 'small danger' }))],
      ], d.webhooks, 'Webhooks') : empty('No webhooks yet.'));
    });
    mount(main, header('Webhooks'),
      ctx.readOnly ? null : section('New webhook', form([
        field('Address', input('url', '', { type: 'url', required: true, placeholder: 'https://example.com/hooks/genied' })),
        field('Events', input('event_types', '*'), 'comma-separated: exact types, family.* or *'),
        field('Description', input('description', '')),
      ], 'Create webhook', async (v, f) => {
        const { webhook } = await api.call('webhooks', 'create', null, { url: v.url, event_types: v.event_types.split(',').map((s) => s.trim()).filter(Boolean), description: v.description || undefined });
        f.reset();
        mount(reveal, once('Signing secret', webhook.secret));
        load();
      }), reveal),
      list, deliveries);
    await load();
  },
};

// ---- teams -----------------------------------------------------------------------------------

export const teams = {
  async render(main, ctx, params) {
    const { api } = ctx;
    const list = h('div', {}, loading());
    const detail = h('div', {});
    const reveal = h('div', {});
    const open = (t) => guarded(detail, async () => {
      const d = await api.call('teams', 'get', t.id);
      const manage = ['owner', 'admin'].includes(d.team.my_role);
      const inv = manage ? await api.call('teams', 'invitations', t.id).then((x) => x.invitations).catch(() => []) : [];
      const inTeam = new Set((d.team.genies || []).map((g) => g.id));
      const mine = manage ? (await api.call('genies', 'list', null, { limit: 500 }).then((x) => x.genies).catch(() => [])).filter((g) => !inTeam.has(g.id)) : [];
      const addGenie = select('genie_id', [['', 'Choose a genie'], ...mine.map((g) => [g.id, g.name])], '');
      const me = ctx.profile?.id;
      // Only the owner changes roles; an admin may remove plain members (the service's rule).
      const canChange = (m) => m.role !== 'owner' && m.user_id !== me && d.team.my_role === 'owner';
      const canRemove = (m) => m.role !== 'owner' && m.user_id !== me && (d.team.my_role === 'owner' || (d.team.my_role === 'admin' && m.role === 'member'));
      const roleControl = (m) => {
        if (!canChange(m)) return m.role;
        const sel = select('role', ['admin', 'member'], m.role, { 'aria-label': 'Role of ' + m.email });
        sel.addEventListener('change', async () => {
          if (await attempt(() => api.call('teams', 'update-member', t.id, { user_id: m.user_id, role: sel.value }), 'Role changed.')) open(t);
          else sel.value = m.role;
        });
        return sel;
      };
      mount(detail, section('Team ' + d.team.name,
        h('h3', {}, 'Members'),
        table([['Email', (m) => m.email], ['Name', (m) => m.full_name || '—'],
          ['Role', (m) => roleControl(m)], ['Joined', (m) => fmtDate(m.joined_at)],
          ['', (m) => canRemove(m) ? button('Remove', async () => {
            if (await confirm(`Remove ${m.email} from “${d.team.name}”?`, 'Remove') && await attempt(() => api.call('teams', 'remove-member', t.id, { user_id: m.user_id }), 'Removed.')) open(t);
          }, { class: 'small danger', 'aria-label': 'Remove ' + m.email }) : null]], d.team.members || [], 'Members'),
        h('h3', {}, 'Genies'),
        (d.team.genies || []).length ? h('ul', { class: 'plain' }, d.team.genies.map((g) => h('li', {}, g.name, ' ',
          ctx.readOnly ? null : button('Remove from team', async () => {
            if (await attempt(() => api.call('teams', 'remove-genie', t.id, { genie_id: g.id }), 'Removed from the team.')) open(t);
          }, { class: 'small', 'aria-label': 'Remove ' + g.name + ' from the team' })))) : empty('No genies in this team.'),
        manage && mine.length ? h('div', { class: 'inline' }, field('Add one of your genies', addGenie), button('Add', async () => {
          if (addGenie.value && await attempt(() => api.call('teams', 'add-genie', t.id, { genie_id: addGenie.value }), 'Added to the team.')) open(t);
        })) : null,
        manage ? [h('h3', {}, 'Invitations'),
          inv.length ? table([['Email', (i) => i.email], ['Role', (i) => i.role], ['Status', (i) => badge(i.status)],
            ['', (i) => i.status === 'pending' ? button('Revoke', async () => { if (await attempt(() => api.call('teams', 'revoke', t.id, { invitation_id: i.id }), 'Revoked.')) open(t); }, { class: 'small' }) : null]], inv, 'Invitations') : empty('No invitations.'),
          form([h('div', { class: 'grid' }, field('Email', input('email', '', { type: 'email', required: true })), field('Role', select('role', ['member', 'admin'], 'member')))], 'Invite', async (v) => {
            const r = await api.call('teams', 'invite', t.id, v);
            mount(reveal, once('Invitation token (send it to ' + v.email + ')', r.token));
            open(t);
          }), reveal] : null,
        d.team.my_role === 'owner'
          ? button('Delete team', async () => { if (await confirm(`Delete the team “${d.team.name}”?`) && await attempt(() => api.call('teams', 'delete', t.id), 'Deleted.')) { mount(detail); load(); } }, { class: 'danger' })
          : button('Leave team', async () => { if (await confirm(`Leave “${d.team.name}”?`, 'Leave') && await attempt(() => api.call('teams', 'leave', t.id), 'Left.')) { mount(detail); load(); } })));
    });
    const load = () => guarded(list, async () => {
      const d = await api.call('teams', 'list');
      mount(list, d.teams.length ? table([
        ['Team', (t) => button(t.name, () => open(t), { class: 'link' })], ['My role', (t) => t.my_role], ['Members', (t) => t.member_count], ['Created', (t) => fmtDate(t.created_at)],
      ], d.teams, 'Teams') : empty('You are in no team yet.'));
    });
    mount(main, header('Teams'),
      ctx.readOnly ? null : h('div', { class: 'columns' },
        section('New team', form([field('Name', input('name', '', { required: true }))], 'Create team', async (v, f) => { await api.call('teams', 'create', null, v); f.reset(); load(); })),
        section('Accept an invitation', form([field('Invitation token', input('token', '', { required: true, autocomplete: 'off' }))], 'Accept', async (v, f) => { await api.call('teams', 'accept', null, { token: v.token }); f.reset(); toast('Joined.'); load(); }))),
      list, detail);
    await load();
  },
};

// ---- activity --------------------------------------------------------------------------------

export const activity = {
  async render(main, ctx) {
    const { api } = ctx;
    const LIMIT = 50;
    let offset = 0;
    const resource = input('resource', '', { placeholder: 'e.g. genies' });
    const range = select('dateRange', [['all', 'Any time'], ['7d', 'Last 7 days'], ['30d', 'Last 30 days'], ['90d', 'Last 90 days']], 'all');
    const list = h('div', {}, loading());
    const load = () => guarded(list, async () => {
      const filters = { dateRange: range.value };
      if (resource.value.trim()) filters.resource = resource.value.trim();
      const d = await api.call('activities', 'list', null, { limit: LIMIT, offset, filters, ...(ctx.adminMode ? { adminMode: true } : {}) });
      mount(list, d.activities.length ? [table([
        ['When', (a) => fmtDate(a.created_at)], ['Resource', (a) => a.resource], ['Action', (a) => a.action], ['Summary', (a) => a.summary || '—'],
        ...(ctx.adminMode ? [['User', (a) => a.user_id]] : []), ['Address', (a) => a.ip || '—'],
      ], d.activities, 'Activity'), pager(d.count, LIMIT, offset, (o) => { offset = o; load(); })] : empty('Nothing recorded yet.'));
    });
    resource.addEventListener('input', debounce(() => { offset = 0; load(); }));
    range.addEventListener('change', () => { offset = 0; load(); });
    mount(main, header('Activity'), h('div', { class: 'filters' }, field('Resource', resource), field('When', range)), list);
    await load();
  },
};

// ---- voices ----------------------------------------------------------------------------------

export const voices = {
  async render(main, ctx) {
    const { api } = ctx;
    const search = input('search', '', { type: 'search', placeholder: 'Name, accent, use' });
    const favs = h('input', { type: 'checkbox', id: 'fav-only' });
    const list = h('div', {}, loading());
    const cols = h('div', { id: 'collections' });
    let collections = [];
    // Names of every voice listed so far, for the collections' lists.
    const names = new Map();
    const voiceName = (id) => names.get(id) || id;
    // Adds a voice to one of the user's collections (the select's choice).
    const addTo = (v) => {
      if (ctx.readOnly || !collections.length) return null;
      const sel = select('collection', [['', 'Add to…'], ...collections.map((c) => [c.id, c.name])], '', { class: 'small', 'aria-label': 'Add ' + v.name + ' to a collection' });
      sel.addEventListener('change', async () => {
        const c = collections.find((x) => x.id === sel.value);
        if (c && await attempt(() => api.call('voice-collections', 'add-voice', c.id, { voice_id: v.voice_id }), `Added to ${c.name}.`)) loadCols();
        sel.value = '';
      });
      return sel;
    };
    const load = () => guarded(list, async () => {
      const d = await api.call('voices', 'list', null, { search: search.value.trim() || undefined, favorites_only: favs.checked || undefined, limit: 200 });
      for (const v of d.voices) names.set(v.voice_id, v.name);
      mount(list, d.voices.length ? table([
        ['Name', (v) => v.name], ['Language', (v) => v.language || '—'], ['Gender', (v) => v.gender || '—'], ['Accent', (v) => v.accent || '—'],
        ['Use', (v) => v.use_case || '—'], ['Source', (v) => v.source],
        ['Favourite', (v) => button(v.is_favorite ? '★' : '☆', async () => { if (await attempt(() => api.call('voices', v.is_favorite ? 'unfavorite' : 'favorite', v.voice_id))) load(); }, { class: 'icon', 'aria-label': (v.is_favorite ? 'Remove ' : 'Add ') + v.name + (v.is_favorite ? ' from' : ' to') + ' favourites', 'aria-pressed': String(!!v.is_favorite) })],
        ['', addTo],
      ], d.voices, 'Voices') : empty('No voice matches.'));
    });
    const loadCols = () => guarded(cols, async () => {
      const d = await api.call('voice-collections', 'list');
      collections = d.collections;
      // The voice table's "Add to…" lists the collections as they are now.
      await load();
      mount(cols, d.collections.length ? h('ul', { class: 'plain' }, d.collections.map((c) => h('li', { class: 'card' },
        h('h3', {}, c.name, h('small', { class: 'muted' }, ` · ${c.voice_count} voices`)),
        c.description ? h('p', {}, c.description) : null,
        (c.voice_ids || []).length ? h('ul', { class: 'plain' }, c.voice_ids.map((id) => h('li', {}, voiceName(id), ' ',
          ctx.readOnly ? null : button('Remove', async () => {
            if (await attempt(() => api.call('voice-collections', 'remove-voice', c.id, { voice_id: id }))) loadCols();
          }, { class: 'small', 'aria-label': `Remove ${voiceName(id)} from ${c.name}` })))) : empty('No voices yet: add them from the list above.'),
        ctx.readOnly ? null : h('div', { class: 'actions' },
          button('Rename', () => dialog('Rename ' + c.name, (close) => form([
            field('Name', input('name', c.name, { required: true, maxlength: 100 })),
            field('Description', textarea('description', c.description, { rows: 2 })),
          ], 'Save', async (v) => {
            await api.call('voice-collections', 'update', c.id, { name: v.name, description: v.description || null });
            close(true);
          })).then((ok) => ok && loadCols()), { class: 'small' }),
          button('Delete', async () => { if (await confirm(`Delete the collection “${c.name}”?`) && await attempt(() => api.call('voice-collections', 'delete', c.id))) loadCols(); }, { class: 'small danger' }))))) : empty('No collections.'),
      ctx.readOnly ? null : form([field('New collection', input('name', '', { required: true }))], 'Create', async (v, f) => { await api.call('voice-collections', 'create', null, { name: v.name }); f.reset(); loadCols(); }));
    });
    search.addEventListener('input', debounce(load));
    favs.addEventListener('change', load);
    mount(main, header('Voices'),
      h('div', { class: 'filters' }, field('Search', search), h('div', { class: 'field check' }, favs, h('label', { for: 'fav-only' }, 'Favourites only'))),
      list, section('Collections', cols));
    await loadCols();
  },
};

// ---- marketplace -----------------------------------------------------------------------------

export const marketplace = {
  async render(main, ctx) {
    const { api } = ctx;
    const search = input('search', '', { type: 'search' });
    const sort = select('sort', ['featured', 'installs', 'newest', 'name'], 'featured');
    const mine = h('input', { type: 'checkbox', id: 'mine-only' });
    const list = h('div', {}, loading());
    const LIMIT = 24;
    let offset = 0;
    const moderate = (l, action, text) => button(text, async () => { if (await attempt(() => api.call('marketplace', action, l.id))) load(); }, { class: 'small' });
    const load = () => guarded(list, async () => {
      const d = await api.call('marketplace', 'list', null, { search: search.value.trim() || undefined, sort: sort.value, mine: mine.checked || undefined, limit: LIMIT, offset, ...(ctx.adminMode ? { adminMode: true } : {}) });
      mount(list, d.listings.length ? h('ul', { class: 'cards' }, d.listings.map((l) => h('li', { class: 'card' },
        h('h3', {}, l.name, l.is_featured ? ' ★' : ''), h('p', {}, l.description || ''),
        h('p', { class: 'muted' }, [l.category, `${l.install_count} installs`, l.publisher?.full_name, l.status].filter(Boolean).join(' · ')),
        h('div', { class: 'actions' },
          ctx.readOnly ? null : button('Install', async () => { const r = await attempt(() => api.call('marketplace', 'install', l.id, {}), 'Installed as a new genie.'); if (r) ctx.navigate('genies/' + r.genie.id); }, { class: 'small primary' }),
          l.is_mine ? button(l.status === 'published' ? 'Unpublish' : 'Publish', async () => { if (await attempt(() => api.call('marketplace', 'update', l.id, { status: l.status === 'published' ? 'unpublished' : 'published' }))) load(); }, { class: 'small' }) : null,
          l.is_mine ? button('Edit', () => editListing(ctx, l).then((x) => x && load()), { class: 'small' }) : null,
          l.is_mine ? button('Delete', async () => { if (await confirm(`Delete the listing “${l.name}”?`) && await attempt(() => api.call('marketplace', 'delete', l.id))) load(); }, { class: 'small danger' }) : null,
          ctx.isAdmin ? [l.is_featured ? moderate(l, 'unfeature', 'Unfeature') : moderate(l, 'feature', 'Feature'),
            l.is_hidden ? moderate(l, 'unhide', 'Unhide') : moderate(l, 'hide', 'Hide')] : null)))) : empty('No listings.'),
      pager(d.total, LIMIT, offset, (o) => { offset = o; load(); }));
    });
    const genies = ctx.readOnly ? [] : await api.call('genies', 'list', null, { limit: 500 }).then((d) => d.genies).catch(() => []);
    const first = () => { offset = 0; load(); };
    search.addEventListener('input', debounce(first));
    sort.addEventListener('change', first);
    mine.addEventListener('change', first);
    mount(main, header('Marketplace'),
      ctx.readOnly || !genies.length ? null : section('Publish a genie', form([
        h('div', { class: 'grid' }, field('Genie', select('genie_id', genies.map((g) => [g.id, g.name]), genies[0].id)), field('Tags', input('tags', ''), 'comma-separated')),
      ], 'Publish', async (v) => {
        await api.call('marketplace', 'publish', null, { genie_id: v.genie_id, tags: v.tags.split(',').map((s) => s.trim()).filter(Boolean) });
        toast('Published.');
        load();
      })),
      h('div', { class: 'filters' }, field('Search', search), field('Sort', sort), h('div', { class: 'field check' }, mine, h('label', { for: 'mine-only' }, 'Mine only'))),
      list);
    await load();
  },
};

function editListing(ctx, l) {
  return dialog('Edit ' + l.name, (close) => form([
    field('Name', input('name', l.name, { required: true })),
    field('Description', textarea('description', l.description, { rows: 3 })),
    h('div', { class: 'grid' }, field('Category', input('category', l.category)), field('Tags', input('tags', (l.tags || []).join(', ')), 'comma-separated')),
    field('System prompt', textarea('system_prompt', l.system_prompt, { rows: 6 })),
    field('First message', textarea('first_message', l.first_message, { rows: 2 })),
  ], 'Save', async (v) => {
    const data = { name: v.name, description: v.description, category: v.category || undefined, tags: v.tags.split(',').map((s) => s.trim()).filter(Boolean) };
    if (v.system_prompt !== (l.system_prompt ?? '')) data.system_prompt = v.system_prompt;
    if (v.first_message !== (l.first_message ?? '')) data.first_message = v.first_message;
    const r = await ctx.api.call('marketplace', 'update', l.id, data);
    toast('Saved.');
    close(r.listing);
  }));
}

// ---- profile and users -----------------------------------------------------------------------

export const profile = {
  async render(main, ctx) {
    const { profile: p } = await ctx.api.call('profiles', 'get');
    mount(main, header('Profile'),
      h('p', { class: 'muted' }, p.email, ' · ', p.role, ' · since ', fmtDate(p.created_at)),
      section('Your details', form([
        field('Full name', input('full_name', p.full_name)),
        field('Time zone', input('timezone', p.timezone, { placeholder: 'Europe/Paris' })),
        field('Avatar URL', input('avatar_url', p.avatar_url, { type: 'url' })),
      ], 'Save', async (v) => {
        const data = {};
        for (const k of ['full_name', 'timezone', 'avatar_url']) data[k] = v[k] === '' ? null : v[k];
        const r = await ctx.api.call('profiles', 'update', null, data);
        ctx.profile.full_name = r.profile.full_name;
        toast('Saved.');
      })),
      h('p', { class: 'muted' }, 'Email, role and password are changed by the operator (genied admin …).'));
  },
};

export const users = {
  async render(main, ctx) {
    const LIMIT = 50;
    let offset = 0;
    const list = h('div', {}, loading());
    const load = () => guarded(list, async () => {
      const d = await ctx.api.call('profiles', 'list', null, { limit: LIMIT, offset });
      mount(list, table([
        ['Email', (p) => p.email], ['Name', (p) => p.full_name || '—'], ['Role', (p) => badge(p.role)], ['Since', (p) => fmtDate(p.created_at)],
      ], d.profiles, 'Users'), pager(d.count, LIMIT, offset, (o) => { offset = o; load(); }));
    });
    mount(main, header('Users'), h('p', { class: 'muted' }, 'Users are created and their roles changed with genied admin create-user / set-role.'), list);
    await load();
  },
};
