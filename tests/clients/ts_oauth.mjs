#!/usr/bin/env node
// An OAuth client of attp-server on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x): its
// OAuthClientProvider through the Streamable HTTP transport, the way Claude's connectors and the MCP Inspector sign
// in. It connects without a token, gets the 401 challenge, discovers the protected-resource metadata and the
// authorization server, registers itself, and "opens" the authorization URL in a scripted browser that signs in as
// --login on the provider's page; it then finishes the flow (code + PKCE verifier -> token), connects again with the
// token, lists the tools and calls attp_execute with --code. It prints one JSON summary on stdout and exits 0 only
// if every step worked.
//
//   node ts_oauth.mjs --url http://127.0.0.1:PORT/mcp --login alice --code '__result__ = 1'
//
// Exit codes: 0 all steps worked, 1 a step failed, 2 bad usage.

import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const REDIRECT = "http://127.0.0.1:9/callback";

let options;
try {
  options = parseArgs({
    options: { url: { type: "string" }, login: { type: "string" }, code: { type: "string" } },
    strict: true,
  }).values;
} catch (error) {
  process.stderr.write(`ts_oauth: ${error.message}\n`);
  process.exit(2);
}
if (!options.url || !options.login || !options.code) {
  process.stderr.write("usage: node ts_oauth.mjs --url URL --login NAME --code CODE\n");
  process.exit(2);
}

// The person's browser: follows redirects with its cookies, signs in on the provider's page, and stops where the
// provider sends it back to the client (the redirect URI with the code).
async function browse(start, login) {
  const cookies = new Map();
  let url = start;
  let method = "GET";
  let body;
  for (let hop = 0; hop < 20; hop += 1) {
    const headers = { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
    if (body) headers["content-type"] = "application/x-www-form-urlencoded";
    const response = await fetch(url, { method, body, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(";");
      const index = pair.indexOf("=");
      cookies.set(pair.slice(0, index), pair.slice(index + 1));
    }
    const location = response.headers.get("location");
    if (response.status === 200 && new URL(url).pathname.startsWith("/interaction/")) {
      method = "POST";
      body = new URLSearchParams({ login }).toString();
      continue;
    }
    if (!location) throw new Error(`the provider answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
    const target = new URL(location, url);
    if (target.href.startsWith(REDIRECT)) return target;
    url = target.href;
    method = "GET";
    body = undefined;
  }
  throw new Error("too many redirects");
}

class Provider {
  constructor(login) {
    this.login = login;
    this.saved = {};
    this.redirected = undefined;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return { client_name: `ts_oauth for ${this.login}`, redirect_uris: [REDIRECT], grant_types: ["authorization_code", "refresh_token"],
             response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() { return this.saved.client; }
  saveClientInformation(info) { this.saved.client = info; }
  tokens() { return this.saved.tokens; }
  saveTokens(tokens) { this.saved.tokens = tokens; }
  saveCodeVerifier(verifier) { this.saved.verifier = verifier; }
  codeVerifier() { return this.saved.verifier; }
  async redirectToAuthorization(url) { this.redirected = await browse(url.href, this.login); }
}

const summary = { ok: false };
try {
  const provider = new Provider(options.login);
  const first = new StreamableHTTPClientTransport(new URL(options.url), { authProvider: provider });
  try {
    await new Client({ name: "ts_oauth", version: "1.0.0" }).connect(first);
    throw new Error("the server let a client without a token in");
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  const back = provider.redirected;
  if (!back?.searchParams.get("code")) throw new Error(`no code came back: ${back?.href}`);
  await first.finishAuth(back.searchParams.get("code"));
  const resource = new URL("/.well-known/oauth-protected-resource/mcp", options.url);
  summary.discovered = await (await fetch(resource)).json();
  const client = new Client({ name: "ts_oauth", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(options.url), { authProvider: provider }));
  summary.tools = (await client.listTools()).tools.map((tool) => tool.name);
  summary.description = (await client.listTools()).tools[0]?.description;
  summary.result = await client.callTool({ name: "attp_execute", arguments: { code: options.code } });
  summary.token_type = provider.saved.tokens?.token_type;
  await client.close();
  summary.ok = true;
} catch (error) {
  summary.error = String(error?.stack ?? error);
}
process.stdout.write(`${JSON.stringify(summary)}\n`);
process.exit(summary.ok ? 0 : 1);
