#!/usr/bin/env node
// The OpenID provider the sign-in tests start: the certified `oidc-provider` (panva), on 127.0.0.1 only.
//
//   node provider.mjs CONFIG.json
//
// CONFIG: {"port": N, "keys": {"keys": [private JWK, ...]}, "users": {"alice": {"groups": ["eng"]}, ...},
//          "clients": [{client_id, client_secret, grant_types, redirect_uris, ...}], "ttl_s": 300,
//          "opaque": false}
//
// What it adds to oidc-provider's defaults, all through its documented extension points:
// * dynamic client registration (the MCP clients register themselves), PKCE required;
// * resource indicators (RFC 8707): an access token for a resource is a JWT (RFC 9068) whose `aud` is that
//   resource, with the account's `groups` (or an opaque token, introspected, with "opaque": true);
// * the client credentials grant for a resource, and introspection and revocation;
// * token exchange (RFC 8693, `registerGrantType`): a confidential client presents a person's access token
//   (`subject_token`) and gets one for another resource (`resource` or `audience`) with the same subject and
//   groups, and `act: {sub: client_id}` naming who acts for them;
// * a scripted sign-in page: GET /interaction/UID shows a form; POST /interaction/UID with `login=NAME`
//   (a user of CONFIG) signs NAME in and grants what the client asked for (the tests' "browser" posts it).
//
// It prints "ready ISSUER" on stdout once it listens.

import { readFileSync } from "node:fs";
import { createPublicKey } from "node:crypto";
import { createServer } from "node:http";

import Provider, { errors } from "oidc-provider";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const port = config.port;
const issuer = `http://127.0.0.1:${port}`;
const users = config.users ?? {};
const ttl = config.ttl_s ?? 300;
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

function resourceInfo(resource) {
  return {
    scope: "mcp",
    audience: resource,
    accessTokenTTL: ttl,
    accessTokenFormat: config.opaque ? "opaque" : "jwt",
    jwt: { sign: { alg: "RS256" } },
  };
}

const provider = new Provider(issuer, {
  jwks: config.keys,
  clients: config.clients ?? [],
  cookies: { keys: ["attp-test-idp-cookie-key"] },
  pkce: { required: () => true },
  scopes: ["openid", "offline_access", "mcp"],
  claims: { openid: ["sub"] },
  ttl: { AccessToken: ttl, ClientCredentials: ttl },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (ctx, client, oneOf) => oneOf ?? undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => resourceInfo(resource),
    },
  },
  async findAccount(ctx, id) {
    if (!(id in users)) return undefined;
    return { accountId: id, claims: () => ({ sub: id, groups: users[id].groups ?? [] }) };
  },
  async extraTokenClaims(ctx, token) {
    if (token.kind === "ClientCredentials") return undefined;
    const user = users[token.accountId];
    if (!user) return undefined;
    const act = token.gty === "token_exchange" ? { act: { sub: token.clientId } } : {};
    return { groups: user.groups ?? [], ...act };
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  clientBasedCORS: () => true,
});
provider.proxy = false;
// What went wrong, on stderr (the tests keep it for a failure's report).
for (const event of ["authorization.error", "grant.error", "server_error", "registration_create.error"]) {
  provider.on(event, (ctx, error) => process.stderr.write(`${event}: ${error?.message} ${error?.error_description ?? ""}\n`));
}

// Token exchange (RFC 8693): a person's access token, presented by a confidential client, for another audience.
const publicKeys = config.keys.keys.map((jwk) => createPublicKey({ key: jwk, format: "jwk" }));
async function subjectOf(token) {
  const { jwtVerify } = await import("jose");
  for (const key of publicKeys) {
    try {
      const { payload } = await jwtVerify(token, key, { issuer });
      return payload;
    } catch {
      // the next key
    }
  }
  const stored = await provider.AccessToken.find(token);
  if (stored && !stored.isExpired) return { sub: stored.accountId, aud: stored.aud };
  return undefined;
}

provider.registerGrantType(
  TOKEN_EXCHANGE,
  async (ctx) => {
    const { params, client } = ctx.oidc;
    if (!client.clientSecret) throw new errors.InvalidClient("token exchange is for confidential clients");
    if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest("subject_token_type must be an access token");
    }
    const subject = await subjectOf(params.subject_token ?? "");
    if (!subject || !(subject.sub in users)) throw new errors.InvalidGrant("subject_token is not valid");
    const resource = params.resource ?? params.audience;
    if (!resource) throw new errors.InvalidTarget("give the resource (or audience) the new token is for");
    const token = new provider.AccessToken({
      accountId: subject.sub,
      client,
      scope: "mcp",
      gty: "token_exchange",
    });
    token.resourceServer = new provider.ResourceServer(resource, resourceInfo(resource));
    const value = await token.save();
    ctx.body = {
      access_token: value,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: "Bearer",
      expires_in: token.expiration,
      scope: "mcp",
    };
  },
  ["subject_token", "subject_token_type", "actor_token", "actor_token_type", "resource", "audience",
    "requested_token_type", "scope"],
);

// The sign-in page: a form for a person, a POST for the tests' browser.
async function interaction(req, res) {
  const url = new URL(req.url, issuer);
  const match = url.pathname.match(/^\/interaction\/([^/]+)$/);
  if (!match) return false;
  if (req.method === "GET") {
    const details = await provider.interactionDetails(req, res);
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><title>Sign in</title><form method="post" action="/interaction/${details.uid}">` +
      `<input name="login" placeholder="user"><button>Sign in</button></form>`);
    return true;
  }
  let body = "";
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 4096) break;
  }
  const login = new URLSearchParams(body).get("login");
  const details = await provider.interactionDetails(req, res);
  if (!(login in users)) {
    await provider.interactionFinished(req, res, { error: "access_denied", error_description: "unknown user" });
    return true;
  }
  const { params } = details;
  const grant = new provider.Grant({ accountId: login, clientId: params.client_id });
  if (params.scope) grant.addOIDCScope(params.scope);
  for (const resource of [].concat(params.resource ?? [])) grant.addResourceScope(resource, "mcp");
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { login: { accountId: login }, consent: { grantId } }, {
    mergeWithLastSubmission: false,
  });
  return true;
}

const callback = provider.callback();
const server = createServer(async (req, res) => {
  try {
    if (await interaction(req, res)) return;
  } catch (error) {
    res.writeHead(400, { "content-type": "text/plain" });
    res.end(String(error?.message ?? error));
    return;
  }
  callback(req, res);
});
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`ready ${issuer}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
