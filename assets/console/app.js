// The console's shell: sign-in, the navigation, and a small router over `/console/...`
// (History API; the server answers every such path with this app). Each page is a module
// whose `render(main, ctx, params)` fills the main region.

import * as api from './api.js';
import { h, mount, field, input, errorBox, button, loading, toast } from './ui.js';

const NAV = [
  ['genies', 'Genies'],
  ['documents', 'Knowledge base'],
  ['conversations', 'Conversations'],
  ['leads', 'Leads'],
  ['analytics', 'Analytics'],
  ['workers', 'Worker genies'],
  ['keys', 'API keys'],
  ['webhooks', 'Webhooks'],
  ['teams', 'Teams'],
  ['activity', 'Activity'],
  ['notifications', 'Notifications'],
  ['voices', 'Voices'],
  ['marketplace', 'Marketplace'],
  ['profile', 'Profile'],
];

const PAGES = {
  genies: () => import('./genies.js'),
  documents: () => import('./documents.js'),
  leads: () => import('./leads.js'),
  analytics: () => import('./analytics.js'),
  keys: () => import('./keys.js'),
  conversations: () => import('./conversations.js'),
  notifications: () => import('./notifications.js'),
  workers: () => import('./more.js').then((m) => m.workers),
  webhooks: () => import('./more.js').then((m) => m.webhooks),
  teams: () => import('./more.js').then((m) => m.teams),
  activity: () => import('./more.js').then((m) => m.activity),
  voices: () => import('./more.js').then((m) => m.voices),
  marketplace: () => import('./more.js').then((m) => m.marketplace),
  profile: () => import('./more.js').then((m) => m.profile),
  users: () => import('./more.js').then((m) => m.users),
};

const app = document.getElementById('app');
const ctx = {
  api,
  profile: null,
  adminMode: false,
  // Bumped on every navigation: a page's timers stop when it is no longer current.
  generation: 0,
  navigate,
  get readOnly() { return this.profile?.role === 'consumer'; },
  get isAdmin() { return this.profile?.role === 'internal_admin'; },
  alive(gen) { return gen === this.generation; },
};

function route() {
  const rest = location.pathname.replace(/^\/console\/?/, '');
  const [page, ...params] = rest.split('/').filter(Boolean).map(decodeURIComponent);
  return { page: page || 'genies', params };
}

export function navigate(path, replace = false) {
  const url = '/console/' + path.replace(/^\//, '');
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render();
}

// Links inside the app navigate without a reload.
document.addEventListener('click', (ev) => {
  const a = ev.target.closest && ev.target.closest('a[href^="/console"]');
  if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || a.target) return;
  ev.preventDefault();
  navigate(a.getAttribute('href').replace(/^\/console\/?/, ''));
});
window.addEventListener('popstate', () => render());

api.setSignedOutHandler(() => { ctx.profile = null; signIn('Your session ended; please sign in again.'); });

function signIn(notice) {
  ctx.generation++;
  const email = input('email', '', { type: 'email', autocomplete: 'username', required: true });
  const password = input('password', '', { type: 'password', autocomplete: 'current-password', required: true });
  const status = h('div', { id: 'signin-status', 'aria-live': 'assertive' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'signin card', id: 'signin' },
    h('h1', {}, 'genied'),
    h('p', { class: 'muted' }, 'Sign in to manage your genies.'),
    notice ? h('p', { class: 'notice' }, notice) : null,
    field('Email', email),
    field('Password', password),
    status,
    h('div', { class: 'actions' }, submit),
    h('p', { class: 'hint' }, 'First start? The first admin, admin@localhost, and its password are in secrets/initial-admin.txt under the data directory.'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    status.replaceChildren();
    submit.disabled = true;
    try {
      await api.login(email.value.trim(), password.value);
      password.value = '';
      await boot();
    } catch (e) {
      let title = null;
      if (e.code === 'INVALID_CREDENTIALS') title = 'Wrong email or password.';
      else if (e.code === 'RATE_LIMIT_EXCEEDED') title = 'Too many sign-in attempts.' + (e.retryAfter ? ` Try again in ${e.retryAfter} s.` : ' Wait a minute and try again.');
      status.append(errorBox({ message: title ? `${title} (${e.message})` : e.message }));
      password.focus();
    } finally {
      submit.disabled = false;
    }
  });
  mount(app, h('main', { id: 'main', class: 'center' }, form));
  email.focus();
  interactive();
  // Single sign-on, when the service has an OpenID provider configured.
  api.authConfig().then((c) => {
    if (!c.oidc || !c.oidc.enabled || !form.isConnected) return;
    form.querySelector('.actions').append(
      h('a', { class: 'button', id: 'signin-oidc', href: c.oidc.authorize_url + '?console=1' }, 'Sign in with single sign-on'));
  }, () => {});
}

/** The pages a mailed or printed link opens: `#reset-password=`, `#accept-invitation=`,
 * `#confirm-email=` (tokens), and `#oidc=` (the single sign-on hand-off). The fragment is
 * dropped from the address at once, so the token stays out of the history. */
function accountLink() {
  const m = /^#(reset-password|accept-invitation|confirm-email|oidc)=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!m) return false;
  history.replaceState(null, '', '/console');
  const [, what, token] = m;
  if (what === 'oidc') {
    api.oidcExchange(token).then(boot, (e) => signIn(e.message));
    return true;
  }
  if (what === 'confirm-email') {
    api.accountPost('/v1/auth/confirm-email', { token })
      .then((d) => signIn('Your email is now ' + d.profile.email + '. Sign in with it.'), (e) => signIn(e.message));
    return true;
  }
  const invite = what === 'accept-invitation';
  const name = invite ? input('full_name', '', { autocomplete: 'name' }) : null;
  const password = input('password', '', { type: 'password', autocomplete: 'new-password', required: true });
  const status = h('div', { id: 'account-status', 'aria-live': 'assertive' });
  const submit = h('button', { type: 'submit', class: 'primary' }, invite ? 'Create my account' : 'Set the password');
  const form = h('form', { class: 'signin card', id: 'account-form' },
    h('h1', {}, 'genied'),
    h('p', { class: 'muted' }, invite ? 'Choose your password to join.' : 'Choose a new password.'),
    name ? field('Your name', name) : null,
    field('New password (12 characters or more, not a common one)', password),
    status,
    h('div', { class: 'actions' }, submit));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    status.replaceChildren();
    submit.disabled = true;
    try {
      if (invite) {
        await api.acceptInvitation(token, password.value, name.value.trim());
        await boot();
      } else {
        await api.accountPost('/v1/auth/reset-password', { token, new_password: password.value });
        signIn('Your password is changed and every session was signed out. Sign in with the new password.');
      }
    } catch (e) {
      status.append(errorBox(e));
      password.focus();
    } finally {
      submit.disabled = false;
    }
  });
  mount(app, h('main', { id: 'main', class: 'center' }, form));
  password.focus();
  interactive();
  return true;
}

/** Milliseconds from navigation start to the first usable page, for the browser tests. */
function interactive() {
  if (window.__consoleInteractive === undefined) window.__consoleInteractive = Math.round(performance.now());
}

function layout() {
  const nav = h('nav', { id: 'nav', 'aria-label': 'Sections' },
    h('ul', {}, [...NAV, ...(ctx.isAdmin ? [['users', 'Users']] : [])].map(([p, t]) =>
      h('li', {}, h('a', { href: '/console/' + p, 'data-page': p }, t)))));
  const menu = button('Menu', () => {
    const open = nav.classList.toggle('open');
    menu.setAttribute('aria-expanded', String(open));
  }, { class: 'menu', 'aria-controls': 'nav', 'aria-expanded': 'false' });
  const admin = ctx.isAdmin ? h('label', { class: 'admin-toggle' },
    h('input', { type: 'checkbox', id: 'admin-mode', checked: ctx.adminMode, onchange: (e) => { ctx.adminMode = e.target.checked; render(); } }),
    ' Admin mode') : null;
  const who = ctx.profile.full_name || ctx.profile.email;
  mount(app,
    h('header', { class: 'top' },
      menu,
      h('a', { class: 'brand', href: '/console/genies' }, 'genied'),
      h('span', { class: 'spacer' }),
      admin,
      h('span', { class: 'who', title: ctx.profile.email }, who, ' · ', ctx.profile.role.replace('_', ' ')),
      button('Sign out', signOut, { id: 'signout' })),
    h('div', { class: 'body' }, nav, h('main', { id: 'main', tabindex: '-1' })));
}

async function signOut() {
  await api.logout().catch((e) => toast(e.message, 'error'));
  ctx.profile = null;
  history.replaceState(null, '', '/console');
  signIn('You are signed out.');
}

async function render() {
  if (!ctx.profile) return;
  const gen = ++ctx.generation;
  const { page, params } = route();
  if (!document.getElementById('nav')) layout();
  const nav = document.getElementById('nav');
  nav.classList.remove('open');
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const main = document.getElementById('main');
  const load = PAGES[page];
  if (!load) {
    mount(main, h('h1', {}, 'Not found'), h('p', {}, 'There is no such page. '), h('a', { href: '/console/genies' }, 'Go to genies'));
    return;
  }
  mount(main, loading());
  try {
    const mod = await load();
    if (!ctx.alive(gen)) return;
    await mod.render(main, { ...ctx, gen, alive: () => ctx.alive(gen) }, params);
  } catch (e) {
    if (ctx.alive(gen)) mount(main, errorBox(e));
  }
  if (ctx.alive(gen)) {
    document.title = (main.querySelector('h1')?.textContent || 'Console') + ' · genied';
    main.dataset.ready = String(gen);
    interactive();
  }
}

async function boot() {
  try {
    const { profile } = await api.call('profiles', 'get');
    ctx.profile = profile;
  } catch (e) {
    signIn(e.status === 401 ? null : e.message);
    return;
  }
  layout();
  await render();
}

if (accountLink()) {
  // A link's own page (or the single sign-on hand-off) comes first.
} else if (api.hasStoredSession()) {
  api.refresh().then(boot, (e) => signIn(e.status === 401 ? 'Please sign in again.' : e.message));
} else {
  signIn();
}
