// Notifications: what genied wants the user to know (worker genies' notify_owner, conversation
// reports, webhooks disabled after failures), newest first, with read state.

import { h, mount, button, loading, empty, errorBox, pager, header, badge, fmtDate, toast, attempt } from './ui.js';

const LIMIT = 25;

export async function render(main, ctx) {
  const { api } = ctx;
  let offset = 0;
  const unreadOnly = h('input', { type: 'checkbox', id: 'unread-only' });
  const list = h('div', { id: 'notifications' }, loading());
  const markAll = button('Mark all as read', async () => {
    const r = await attempt(() => api.call('notifications', 'mark-all-read'));
    if (r) { toast(r.updated === 1 ? '1 notification marked as read.' : `${r.updated} notifications marked as read.`); load(); }
  }, { id: 'mark-all-read' });
  const load = async () => {
    try {
      const d = await api.call('notifications', 'list', null, { limit: LIMIT, offset, unreadOnly: unreadOnly.checked || undefined });
      if (!ctx.alive()) return;
      markAll.disabled = !d.unread;
      mount(list,
        h('p', { class: 'muted', id: 'unread-count' }, d.unread === 1 ? '1 unread' : `${d.unread} unread`),
        d.notifications.length ? h('ul', { class: 'plain notifications' }, d.notifications.map((n) => h('li', { class: 'card' + (n.read_at ? '' : ' unread') },
          h('h3', {}, n.read_at ? null : badge('new', 'pending'), ' ', n.title),
          n.body ? h('p', { class: 'wrap' }, n.body) : null,
          h('p', { class: 'muted' }, n.kind.replaceAll('_', ' '), ' · ', fmtDate(n.created_at)),
          n.read_at ? null : button('Mark as read', async () => {
            if (await attempt(() => api.call('notifications', 'mark-read', n.id))) load();
          }, { class: 'small', 'aria-label': 'Mark “' + n.title + '” as read' }))))
          : empty(unreadOnly.checked ? 'Nothing unread.' : 'No notifications yet.'),
        pager(d.count, LIMIT, offset, (o) => { offset = o; load(); }));
    } catch (e) { mount(list, errorBox(e)); }
  };
  unreadOnly.addEventListener('change', () => { offset = 0; load(); });
  mount(main, header('Notifications', markAll),
    h('div', { class: 'filters' }, h('div', { class: 'field check' }, unreadOnly, h('label', { for: 'unread-only' }, 'Unread only'))),
    list);
  await load();
}
