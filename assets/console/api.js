// The console's only door to genied: the public API (`POST /v1` envelopes, `/v1/auth/*`,
// the multipart upload). The access token lives in memory only and is refreshed before it
// expires; the refresh token is the one secret kept in localStorage, so a reload stays
// signed in. Nothing here logs a token or a response body.

const REFRESH_KEY = 'genied.refresh_token';

export class ApiError extends Error {
  constructor(message, code, status, retryAfter) {
    super(message);
    this.code = code;
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

let access = null;
let timer = null;
let onSignedOut = () => {};
let refreshing = null;

export function setSignedOutHandler(fn) { onSignedOut = fn; }
export function signedIn() { return access !== null; }
export function hasStoredSession() { return !!localStorage.getItem(REFRESH_KEY); }

async function post(path, body, headers = {}) {
  let resp;
  try {
    resp = await fetch(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body ?? {}),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError('The service could not be reached (' + e.message + ').', 'NETWORK', 0);
  }
  return envelope(resp);
}

async function envelope(resp) {
  let json = null;
  try { json = await resp.json(); } catch { /* not JSON */ }
  if (json && json.success === true) return json.data;
  const err = json && json.error;
  const retry = Number(resp.headers.get('retry-after')) || undefined;
  throw new ApiError(
    (err && err.message) || ('The service answered ' + resp.status + '.'),
    (err && err.code) || 'HTTP_' + resp.status,
    resp.status,
    retry,
  );
}

function keep(pair) {
  access = pair.access_token;
  localStorage.setItem(REFRESH_KEY, pair.refresh_token);
  clearTimeout(timer);
  // Refresh a minute before expiry (or at 80% of a short lifetime).
  const ttl = Math.max(5, Number(pair.expires_in) || 3600);
  const lead = Math.min(60, ttl * 0.2);
  timer = setTimeout(() => { refresh().catch(() => {}); }, (ttl - lead) * 1000);
}

function forget() {
  access = null;
  clearTimeout(timer);
  localStorage.removeItem(REFRESH_KEY);
}

export async function login(email, password) {
  const pair = await post('/v1/auth/login', { email, password });
  keep(pair);
}

/** Signs in with the token pair an account route answered (invitation, single sign-on). */
export async function acceptInvitation(token, password, fullName) {
  keep(await post('/v1/auth/accept-invitation', { token, password, ...(fullName ? { full_name: fullName } : {}) }));
}

/** Trades the one-time code the OpenID callback put in the URL fragment for tokens. */
export async function oidcExchange(code) {
  keep(await post('/v1/auth/oidc/exchange', { code }));
}

/** The signed-out account routes (reset a password, confirm an email). */
export function accountPost(path, body) {
  return post(path, body);
}

/** What the sign-in page offers (`{password_min_length, oidc: {enabled, authorize_url}}`). */
export async function authConfig() {
  return envelope(await fetch('/v1/auth/config', { credentials: 'omit', cache: 'no-store' }));
}

/** Exchanges the stored refresh token for a new pair; one exchange at a time. */
export function refresh() {
  if (refreshing) return refreshing;
  refreshing = (async () => {
    const token = localStorage.getItem(REFRESH_KEY);
    if (!token) throw new ApiError('Not signed in.', 'UNAUTHORIZED', 401);
    try {
      keep(await post('/v1/auth/refresh', { refresh_token: token }));
    } catch (e) {
      // Another tab may have rotated the token meanwhile: use the one it stored.
      const now = localStorage.getItem(REFRESH_KEY);
      if (e.status === 401 && now && now !== token) {
        keep(await post('/v1/auth/refresh', { refresh_token: now }));
      } else {
        if (e.status === 401) { forget(); onSignedOut(); }
        throw e;
      }
    }
  })().finally(() => { refreshing = null; });
  return refreshing;
}

export async function logout() {
  const token = access;
  try {
    if (token) await post('/v1/auth/logout', {}, { authorization: 'Bearer ' + token });
  } finally {
    forget();
  }
}

async function authed(send) {
  if (!access) await refresh();
  try {
    return await send(access);
  } catch (e) {
    if (e.status === 401 && e.code === 'INVALID_TOKEN' && hasStoredSession()) {
      await refresh();
      return send(access);
    }
    throw e;
  }
}

/** One envelope call: `{resource, action, id, data}`; resolves to `data`, throws ApiError. */
export function call(resource, action, id, data) {
  const body = { resource, action, data: data ?? {} };
  if (id !== undefined && id !== null) body.id = id;
  return authed((t) => post('/v1', body, { authorization: 'Bearer ' + t }));
}

/** Multipart upload of one file to the knowledge base. */
export function upload(file, fields = {}) {
  return authed(async (t) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) if (v !== undefined && v !== null && v !== '') form.append(k, v);
    form.append('file', file, file.name);
    let resp;
    try {
      resp = await fetch('/v1/knowledge-base/upload', {
        method: 'POST', body: form, headers: { authorization: 'Bearer ' + t }, credentials: 'omit',
      });
    } catch (e) {
      throw new ApiError('The upload could not reach the service (' + e.message + ').', 'NETWORK', 0);
    }
    return envelope(resp);
  });
}

/** An authenticated GET of a binary (QR images); resolves to a Blob. */
export function blob(path) {
  return authed(async (t) => {
    const resp = await fetch(path, { headers: { authorization: 'Bearer ' + t }, credentials: 'omit' });
    if (!resp.ok) return envelope(resp);
    return resp.blob();
  });
}
