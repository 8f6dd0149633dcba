// The centre's OpenID Connect provider, as the tests meet it: panva's certified `oidc-provider`
// (installed by scripts/oidc, which starts this file), with one client for hpcgrade and a few
// accounts that have real passwords.
//
// The provider's own development log-in form takes any password, so a "wrong password" could
// never be tested against it: this file answers the log-in interaction itself, checking the
// password, and offers "Cancel" (the person declines: hpcgrade gets access_denied). Consent is
// given by the centre for its own service (loadExistingGrant), as a university's provider does
// for first-party applications, so the person sees one form.
//
// Tests add people of their own, or change their groups, with
//   PUT /test-accounts/<sub>  {"password": "...", "claims": {...}}
// authorised by the client's secret (the provider listens on the loopback only).
//
// Environment: HPCGRADE_OIDC_PORT (9400), HPCGRADE_OIDC_CLIENT_ID, HPCGRADE_OIDC_CLIENT_SECRET.
import { generateKeyPairSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

import Provider, { interactionPolicy } from 'oidc-provider';

const port = Number(process.env.HPCGRADE_OIDC_PORT || 9400);
const issuer = `http://127.0.0.1:${port}`;
const clientId = process.env.HPCGRADE_OIDC_CLIENT_ID || 'hpcgrade';
const clientSecret = process.env.HPCGRADE_OIDC_CLIENT_SECRET || 'hpcgrade-test-secret';
const SCOPES = ['openid', 'profile', 'email', 'groups'];

const accounts = new Map(Object.entries({
  ada: { password: 'ada-password', claims: { preferred_username: 'ada', name: 'Ada Alumna',
    email: 'ada@uni.example', groups: ['pytorch-students'] } },
  bruno: { password: 'bruno-password', claims: { preferred_username: 'bruno', name: 'Bruno Tutor',
    email: 'bruno@uni.example', groups: ['pytorch-staff'] } },
  carmen: { password: 'carmen-password', claims: { preferred_username: 'carmen',
    name: 'Carmen Both', email: 'carmen@uni.example',
    groups: ['pytorch-students', 'pytorch-staff'] } },
}));

// The centre consents for its own service (loadExistingGrant below); oidc-provider would still
// ask a native client's user each time (RFC 8252 §8.6), which a first-party web client is not.
const policy = interactionPolicy.base();
policy.get('consent').checks.remove('native_client_prompt');

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    // native: oidc-provider then takes a loopback redirect URI on any port (RFC 8252 §7.3),
    // and every test runs hpcgrade on a free port of its own
    application_type: 'native',
    redirect_uris: ['http://127.0.0.1/login/oidc/callback', 'http://localhost/login/oidc/callback'],
    post_logout_redirect_uris: ['http://127.0.0.1/login', 'http://localhost/login'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  pkce: { required: () => true },
  scopes: SCOPES,
  claims: {
    openid: ['sub'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  features: { devInteractions: { enabled: false } },
  interactions: { policy },
  jwks: { keys: [{ ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
    .export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), use: 'sig', alg: 'RS256' }] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  findAccount: (_ctx, sub) => accounts.has(sub)
    ? { accountId: sub, claims: () => ({ sub, ...accounts.get(sub).claims }) }
    : undefined,
  loadExistingGrant: async (ctx) => {
    const known = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (known) return ctx.oidc.provider.Grant.find(known);
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(SCOPES.join(' '));
    await grant.save();
    return grant;
  },
  renderError: (ctx, out) => {
    ctx.type = 'html';
    ctx.body = page('Error', `<p id="error">${escape(out.error)}: ${escape(out.error_description)}</p>`);
  },
});

function escape(text) {
  return String(text ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title, body) {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main><h1>${title}</h1>${body}</main></body></html>`;
}

function loginForm(uid, message = '') {
  return page('University sign-in', `${message && `<p id="error">${escape(message)}</p>`}
<form method="post" action="/interaction/${uid}/login">
  <label>Username <input name="username" autocomplete="username" required autofocus></label>
  <label>Password <input name="password" type="password" autocomplete="current-password" required></label>
  <button type="submit">Sign in</button>
</form>
<form method="post" action="/interaction/${uid}/abort"><button type="submit">Cancel</button></form>`);
}

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
}

function send(res, status, type, text) {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
  res.end(text);
}

function authorised(req) {
  const given = Buffer.from(req.headers.authorization || '');
  const expected = Buffer.from(`Bearer ${clientSecret}`);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return send(res, 400, 'text/plain', 'not this interaction');
  if (req.method === 'GET') return send(res, 200, 'text/html', loginForm(uid));
  if (action === 'abort') {
    return provider.interactionFinished(req, res, {
      error: 'access_denied', error_description: 'the person cancelled the sign-in',
    }, { mergeWithLastSubmission: false });
  }
  const form = new URLSearchParams(await body(req));
  const account = accounts.get(form.get('username'));
  if (!account || account.password !== form.get('password')) {
    return send(res, 401, 'text/html', loginForm(uid, 'Wrong username or password.'));
  }
  return provider.interactionFinished(req, res, { login: { accountId: form.get('username') } },
    { mergeWithLastSubmission: false });
}

const handle = provider.callback();
createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  const [, first, uid, action] = url.pathname.split('/');
  try {
    if (first === 'interaction' && uid) return await interaction(req, res, uid, action);
    if (first === 'test-accounts' && uid && req.method === 'PUT') {
      if (!authorised(req)) return send(res, 401, 'text/plain', 'the client secret, please');
      accounts.set(uid, JSON.parse(await body(req)));
      return send(res, 204, 'text/plain', '');
    }
  } catch (error) {
    return send(res, 400, 'text/plain', String(error.message));  // e.g. an expired interaction
  }
  return handle(req, res);
}).listen(port, '127.0.0.1', () => console.log(`oidc-provider at ${issuer}`));
