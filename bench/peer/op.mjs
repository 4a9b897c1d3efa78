// bench/run's peer: npm oidc-provider (the version pinned in package.json) with the minimal
// configuration of test-peers.md section 7, on 127.0.0.1:$PORT.
//
// Two changes from that configuration, both needed for a like-for-like run, both noted in the
// README:
// - Refresh tokens rotate on every use (rotateRefreshToken: true), as latch's do. By default
//   oidc-provider rotates only for public clients or near expiry, and `app` is confidential.
// - Its own in-memory adapter (MemoryAdapter), but over a larger store: the default store is an
//   LRU of 1,000 entries, so the refresh tokens minted before the refresh scenario (and the token
//   the introspection scenario reads) would be evicted long before they are used.
// And codes live 600 s instead of 60 s, so they can be minted before they are exchanged (latch
// runs with code_lifetime = "600s" for the same reason).
//
// Refresh tokens for the refresh scenario: on SIGUSR2 it mints $OP_MINT_REFRESH of them through
// its own models, as a code exchange with scope "openid offline_access" would leave them (one
// Grant per token, for 32 accounts), and writes them as token request bodies, one per line, to
// $OP_MINT_REFRESH_FILE (written whole, then renamed). Its authorization endpoint keeps
// offline_access only with prompt=consent, so minting them over HTTP costs a consent round trip
// per code (about 100 codes/s here, minutes per run). Nothing of this is on the request path.
//
//   PORT=3000 node op.mjs
import { renameSync, writeFileSync } from 'node:fs';

import Provider from 'oidc-provider';
import MemoryAdapter from 'oidc-provider/lib/adapters/memory_adapter.js';
import LRU from 'oidc-provider/lib/helpers/lru.js';

const port = Number(process.env.PORT || 3000);
const store = new LRU({ maxSize: Number(process.env.OP_STORE_SIZE || 2_000_000) });

const provider = new Provider(`http://127.0.0.1:${port}`, {
  adapter: (model) => new MemoryAdapter(model, store),
  clients: [{
    client_id: 'app', client_secret: 'secret',
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'], response_types: ['code'],
    redirect_uris: ['http://localhost:3001/cb'], post_logout_redirect_uris: ['http://localhost:3001/'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  features: {
    clientCredentials: { enabled: true }, introspection: { enabled: true }, revocation: { enabled: true },
    devInteractions: { enabled: true }, // built-in login form: any login/password
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined, // no resource: opaque tokens; resource=urn:api: RFC 9068 JWTs
      getResourceServerInfo: () => ({
        scope: 'api:read', audience: 'urn:api', accessTokenFormat: 'jwt',
        accessTokenTTL: 3600, jwt: { sign: { alg: 'RS256' } },
      }),
      useGrantedResource: () => true,
    },
  },
  scopes: ['openid', 'offline_access', 'api:read'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  findAccount: async (ctx, id) => ({
    accountId: id, claims: async () => ({ sub: id, email: `${id}@example.com`, email_verified: true }),
  }),
  pkce: { required: () => true },
  rotateRefreshToken: () => true,
  ttl: { AuthorizationCode: 600 },
});
provider.listen(port, '127.0.0.1');

async function mintRefreshTokens(n, file) {
  const client = await provider.Client.find('app');
  const now = Math.floor(Date.now() / 1000);
  const lines = [];
  for (let i = 0; i < n; i += 1) {
    const accountId = `user${String(i % 32).padStart(3, '0')}`;
    const grant = new provider.Grant({ accountId, clientId: 'app' });
    grant.addOIDCScope('openid offline_access');
    const grantId = await grant.save();
    const rt = new provider.RefreshToken({
      accountId, client, grantId, scope: 'openid offline_access', gty: 'authorization_code',
      authTime: now, iiat: now, expiresWithSession: false,
    });
    lines.push(`grant_type=refresh_token&refresh_token=${await rt.save()}\n`);
  }
  writeFileSync(`${file}.tmp`, lines.join(''));
  renameSync(`${file}.tmp`, file);
}
process.on('SIGUSR2', () => {
  mintRefreshTokens(Number(process.env.OP_MINT_REFRESH || 0), process.env.OP_MINT_REFRESH_FILE)
    .catch((err) => { console.error('minting refresh tokens failed:', err); process.exit(1); });
});
