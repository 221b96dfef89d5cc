// A real OAuth 2.1 authorization server for end-to-end tests: oidc-provider, configured for one
// confidential client that gets RFC 9068 JWT access tokens with the client-credentials grant,
// audience-restricted to an MCP server by RFC 8707 resource indicators.
//
//   node authorization-server.mjs --port 0 --resource http://127.0.0.1:10000/mcp \
//     --scopes "catalog:read users:read" --client-id ID --client-secret SECRET
//
// --port 0 picks a free port. --resource may be repeated: the first is the default audience for a
// request that names none, the others let a test obtain a validly signed token for another
// resource. Prints `READY <issuer>` on stdout once it accepts connections; stops on SIGTERM/SIGINT.
// Diagnostics go to stderr. Works on the machine's Node 20.20 as on Node 22; on 20, oidc-provider
// warns on stderr that it supports Node 22 LTS and later.

import { generateKeyPairSync } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

function fail(message) {
  console.error(`authorization-server: ${message}`);
  process.exit(2);
}

const options = {
  port: { type: 'string' },
  resource: { type: 'string', multiple: true },
  scopes: { type: 'string' },
  'client-id': { type: 'string' },
  'client-secret': { type: 'string' },
  'token-ttl': { type: 'string', default: '600' },
};
let args;
try {
  ({ values: args } = parseArgs({ options }));
} catch (error) {
  fail(error.message);
}

for (const name of ['port', 'resource', 'scopes', 'client-id', 'client-secret']) {
  if (args[name] === undefined) fail(`--${name} is required`);
}
const port = Number(args.port);
const tokenTtl = Number(args['token-ttl']);
const resources = args.resource;
const scopes = args.scopes.split(' ').filter(Boolean);
if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port ${args.port} is not a port`);
if (!Number.isInteger(tokenTtl) || tokenTtl <= 0) fail(`--token-ttl ${args['token-ttl']} is not a duration in seconds`);
if (scopes.length === 0) fail('--scopes names no scope');
for (const resource of resources) {
  // RFC 8707: a resource indicator is an absolute URI without a fragment.
  if (!URL.canParse(resource) || resource.includes('#')) {
    fail(`--resource ${resource} is not an absolute URI without a fragment`);
  }
}

// Bind first so that --port 0 works: the issuer has to name the port actually bound.
const server = createServer();
server.listen(port, '127.0.0.1');
await once(server, 'listening').catch((error) => fail(`cannot listen on 127.0.0.1:${port}: ${error.message}`));
// No trailing slash: an issuer identifier is compared as a plain string (RFC 8414 section 3.3),
// so this exact text is what PRM's `authorization_servers` must list.
const issuer = `http://127.0.0.1:${server.address().port}`;

// A fresh key per run: the tests fetch it from jwks_uri like any resource server would, and no
// token survives a restart.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), alg: 'RS256', use: 'sig' };

const resourceServer = (audience) => ({
  audience,
  scope: scopes.join(' '),
  accessTokenFormat: 'jwt',
  accessTokenTTL: tokenTtl,
  jwt: { sign: { alg: 'RS256' } },
});

// `openid` is allowed only so that a client falling back to the AS's scopes_supported (which
// oidc-provider always gives `openid`) is not refused; a resource's token never carries it.
const clientScopes = [...scopes, 'openid'];

const provider = new Provider(issuer, {
  clients: [{
    client_id: args['client-id'],
    client_secret: args['client-secret'],
    // Registering either of the two secret methods lets the client use both: oidc-provider
    // treats client_secret_basic and client_secret_post as interchangeable.
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    scope: clientScopes.join(' '),
  }],
  // The provider's own scopes, so that discovery advertises them in scopes_supported.
  scopes,
  // OAuth 2.1 has no implicit grant; keep it out of the advertised metadata.
  responseTypes: ['code'],
  jwks: { keys: [signingKey] },
  features: {
    clientCredentials: { enabled: true },
    // No login pages: this server only ever authenticates clients.
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      // A request naming no resource still gets an audience-restricted JWT, for the first
      // resource: without a resource oidc-provider could only issue an opaque token that no
      // resource server here can verify, and a client on the pre-RFC 8707 path omits it.
      defaultResource: () => resources[0],
      // Exact string match, no normalization, because the resource server compares `aud` the
      // same way; anything else is refused with invalid_target.
      getResourceServerInfo: (ctx, indicator) => {
        if (!resources.includes(indicator)) {
          throw new errors.InvalidTarget(`${indicator} is not a resource this server issues tokens for`);
        }
        // oidc-provider would drop an unknown scope silently and then omit `scope` from the
        // response, which a client reads as "all requested scopes granted" (RFC 6749 section 5.1).
        const unknown = [...ctx.oidc.requestParamScopes].filter((s) => s && !clientScopes.includes(s));
        if (unknown.length) {
          throw new errors.InvalidScope('requested scope is not allowed', unknown.join(' '));
        }
        return resourceServer(indicator);
      },
    },
  },
  // Set explicitly, because the defaults print a notice to stdout, which carries READY.
  ttl: { ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? tokenTtl },
});

// Refusals are what tests of the unhappy paths look for in the logs.
for (const event of ['grant.error', 'server_error']) {
  provider.on(event, (ctx, error) => {
    const detail = error.error_description ? ` (${error.error_description})` : '';
    console.error(`authorization-server: ${event}: ${error.message}${detail}`);
  });
}

server.on('request', provider.callback());

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.once('SIGTERM', stop);
process.once('SIGINT', stop);

console.log(`READY ${issuer}`);
