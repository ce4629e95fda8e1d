// A certified OpenID provider (node-oidc-provider) for the OIDC tests, configured by the
// JSON in OP_CONFIG: {port, issuer, client_id, client_secret, redirect_uri, accounts:
// {id: {claims}}}. Its development login form accepts any password for a known account id;
// consent is granted at once (loadExistingGrant), so a test drives one form post. Prints
// "ready" on stdout once it listens.
import Provider from 'oidc-provider';

const cfg = JSON.parse(process.env.OP_CONFIG);

const provider = new Provider(cfg.issuer, {
  clients: [{
    client_id: cfg.client_id,
    client_secret: cfg.client_secret,
    redirect_uris: [cfg.redirect_uri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true, methods: ['S256'] },
  features: { devInteractions: { enabled: true } },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  // The requested claims go in the ID token itself, which is all genied reads.
  conformIdTokenClaims: false,
  cookies: { keys: ['genied-test-cookie-key'] },
  async findAccount(ctx, id) {
    const a = cfg.accounts[id];
    if (!a) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...a }; } };
  },
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
});

provider.listen(cfg.port, '127.0.0.1', () => {
  console.log('ready');
});
