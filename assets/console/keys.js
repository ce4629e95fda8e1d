// API keys: create (the full key is shown once, with a copy button, and removed from the page
// when dismissed or when the page is left), revoke, delete.

import { h, mount, field, input, button, loading, empty, errorBox, form, table, confirm, header,
  section, badge, fmtDate, toast, attempt, copy } from './ui.js';

export async function render(main, ctx) {
  const { api } = ctx;
  const results = h('div', {}, loading());
  const reveal = h('div', { id: 'new-key', 'aria-live': 'polite' });
  const load = async () => {
    try {
      const d = await api.call('api-keys', 'list');
      if (!ctx.alive()) return;
      mount(results, d.api_keys.length ? table([
        ['Name', (k) => k.name],
        ['Key', (k) => h('code', {}, k.key_prefix, '…')],
        ['Status', (k) => badge(k.status)],
        ['Created', (k) => fmtDate(k.created_at)],
        ['Last used', (k) => fmtDate(k.last_used_at)],
        ['', (k) => h('span', { class: 'row-actions' },
          k.status === 'active' ? button('Revoke', async () => {
            if (!(await confirm(`Revoke “${k.name}”? Requests with it stop working at once.`, 'Revoke'))) return;
            if (await attempt(() => api.call('api-keys', 'revoke', k.id), 'Key revoked.')) load();
          }, { class: 'small', 'data-key': k.name, 'aria-label': 'Revoke ' + k.name }) : null,
          button('Delete', async () => {
            if (!(await confirm(`Delete “${k.name}”?`))) return;
            if (await attempt(() => api.call('api-keys', 'delete', k.id), 'Key deleted.')) load();
          }, { class: 'small danger', 'aria-label': 'Delete ' + k.name }))],
      ], d.api_keys, 'API keys') : empty('No API keys yet.'));
    } catch (e) { mount(results, errorBox(e)); }
  };
  const create = form([field('Name', input('name', '', { required: true, maxlength: 100, placeholder: 'e.g. CRM integration' }))], 'Create key', async (v, f) => {
    const { api_key } = await api.call('api-keys', 'create', null, { name: v.name });
    f.reset();
    const box = h('input', { readonly: true, value: api_key.key, class: 'secret', id: 'new-key-value', 'aria-label': 'The new API key' });
    const clear = () => { box.value = ''; mount(reveal); };
    mount(reveal, h('div', { class: 'card reveal' },
      h('p', {}, h('strong', {}, 'Copy this key now: '), 'it is shown only once and cannot be read again.'),
      h('div', { class: 'inline' }, box,
        button('Copy', () => copy(box.value, box), { id: 'copy-key' }),
        button('Done', clear, { id: 'key-done' }))));
    box.select();
    load();
  }, { id: 'key-form' });
  mount(main,
    header('API keys'),
    h('p', { class: 'muted' }, 'Keys let programs call the API as you (Authorization: Bearer svc_live_…). At most 5 active keys.'),
    section('New key', create, reveal),
    results);
  await load();
}
