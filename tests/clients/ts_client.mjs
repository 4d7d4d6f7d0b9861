#!/usr/bin/env node
// A second-language MCP client for attp-server, on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x,
// the library n8n's MCP Client node is built on). It connects over SSE and/or Streamable HTTP, and for each:
// lists the tools, runs a real program through `attp_execute` with an extra `toolCallId` argument (n8n adds one
// to every call), checks that a failing program comes back as a result with isError, reads a resource and gets
// the prompt. It prints one JSON summary on stdout and exits 0 only if every check passed.
//
//   node ts_client.mjs --url http://127.0.0.1:8765 [--transport sse|streamable-http|both]
//                      [--header "Authorization: Bearer X"]... [--folder clients/ts] [--timeout-ms 20000]
//
// Exit codes: 0 all checks passed, 1 a check failed or the connection failed, 2 bad usage.
// On a connection failure the summary carries the HTTP status the SDK saw (e.g. 401) as `http_status`.
//
//   node ts_client.mjs --runs '[{"url": "http://127.0.0.1:8765", "transport": "sse", "header": [...], "folder": "x"}, ...]'
//
// runs each entry (keys as the options above, same defaults) as its own invocation would, one after another in
// this one process (a Node start with the SDK costs more CPU than a run), and prints {"ok", "runs": [summary, ...]}:
// each summary as that invocation prints it, plus the exit code it would have had as `exit_code`. It exits 0 once
// every run is summarised (anything else is a crash of this program), 2 on bad usage.

import { readFileSync } from "node:fs";
import { isDeepStrictEqual, parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const SDK_VERSION = JSON.parse(
  readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url), "utf8"),
).version;

const TRANSPORTS = {
  sse: (base, init) => new SSEClientTransport(new URL("/sse", base), { requestInit: init }),
  "streamable-http": (base, init) => new StreamableHTTPClientTransport(new URL("/mcp", base), { requestInit: init }),
};

function usage(message) {
  process.stderr.write(`ts_client: ${message}\n`);
  process.stderr.write(
    "usage: node ts_client.mjs --url http://HOST:PORT [--transport sse|streamable-http|both] " +
      '[--header "Name: Value"]... [--folder PATH] [--timeout-ms N]\n' +
      "       node ts_client.mjs --runs JSON [--timeout-ms N]\n",
  );
  process.exit(2);
}

function parseCommandLine() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        url: { type: "string" },
        transport: { type: "string" },
        header: { type: "string", multiple: true },
        folder: { type: "string" },
        runs: { type: "string" },
        "timeout-ms": { type: "string", default: "20000" },
      },
      strict: true,
    }).values;
  } catch (error) {
    usage(error.message);
  }
  const timeout = Number.parseInt(parsed["timeout-ms"], 10);
  if (!(timeout > 0)) usage("--timeout-ms must be a positive integer");
  if (parsed.runs === undefined) return { batch: false, runs: [runOptions(parsed, timeout)] };
  if (parsed.url !== undefined || parsed.transport !== undefined || parsed.header !== undefined || parsed.folder !== undefined) {
    usage("--runs replaces --url, --transport, --header and --folder");
  }
  let runs;
  try {
    runs = JSON.parse(parsed.runs);
  } catch (error) {
    usage(`--runs is not JSON: ${error.message}`);
  }
  if (!Array.isArray(runs) || runs.length === 0) usage("--runs is a non-empty JSON array of runs");
  return { batch: true, runs: runs.map((run) => runOptions(run ?? {}, timeout)) };
}

// One run's options from its --url, --transport, --header and --folder (or a --runs entry's keys of those names).
function runOptions({ url, transport = "both", header = [], folder = "clients/ts" }, timeout) {
  if (!url) usage("--url is required");
  const transports = transport === "both" ? Object.keys(TRANSPORTS) : [transport];
  for (const name of transports) if (!(name in TRANSPORTS)) usage(`unknown transport ${JSON.stringify(name)}`);
  if (!Array.isArray(header)) usage(`a run's headers are a list, got ${JSON.stringify(header)}`);
  const headers = {};
  for (const line of header) {
    const colon = typeof line === "string" ? line.indexOf(":") : -1;
    if (colon <= 0) usage(`a header is "Name: Value", got ${JSON.stringify(line)}`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return { url, transports, headers, folder, timeout };
}

// A real program: write a CSV, read it back, parse and aggregate it, list the folder, print a line.
function program(folder) {
  return [
    `folder = ${JSON.stringify(folder)}`,
    'rows = [("Oslo", -3), ("Rome", 14), ("Cairo", 25), ("Lima", 18)]',
    'csv = "city,temp\\n" + "".join(city + "," + str(temp) + "\\n" for city, temp in rows)',
    'write_file(folder + "/temps.csv", csv)',
    'parsed = [line.split(",") for line in read_file(folder + "/temps.csv").splitlines()[1:]]',
    "temps = {city: int(temp) for city, temp in parsed}",
    'print("rows", len(temps))',
    "__result__ = {",
    '    "files": list_files(folder),',
    '    "n": len(temps),',
    '    "mean": statistics.mean(temps.values()),',
    '    "warmest": max(temps, key=temps.get),',
    '    "above_zero": sorted(c for c, t in temps.items() if t > 0),',
    "}",
  ].join("\n");
}

function expectedResult(folder) {
  return { files: [`${folder}/temps.csv`], n: 4, mean: 13.5, warmest: "Cairo", above_zero: ["Cairo", "Lima", "Rome"] };
}

class Checks {
  constructor() {
    this.list = [];
  }

  check(name, ok, detail) {
    this.list.push(ok ? { name, ok: true } : { name, ok: false, detail });
    return ok;
  }

  get ok() {
    return this.list.every((c) => c.ok);
  }
}

function textOf(result) {
  const first = result?.content?.[0];
  return first?.type === "text" ? first.text : "";
}

async function exercise(name, options) {
  const checks = new Checks();
  const report = { transport: name, ok: false, checks: checks.list };
  const requestOptions = { timeout: options.timeout };
  const client = new Client({ name: "attp-ts-client", version: "1.0.0" });
  const transport = TRANSPORTS[name](options.url, { headers: options.headers });
  try {
    await client.connect(transport, requestOptions);
  } catch (error) {
    report.error = `connect: ${error?.message ?? String(error)}`;
    if (typeof error?.code === "number" && error.code > 0) report.http_status = error.code;
    await client.close().catch(() => {});
    return report;
  }
  try {
    const server = client.getServerVersion();
    report.server = server;
    report.protocol_version = transport.protocolVersion ?? transport._protocolVersion ?? null;
    checks.check("server is attp-server", server?.name === "attp-server", server);

    // tools/list: exactly one tool, with the input and output schemas n8n builds its tool from.
    const { tools } = await client.listTools(undefined, requestOptions);
    report.tools = tools.map((t) => t.name);
    checks.check("tools/list is exactly attp_execute", isDeepStrictEqual(report.tools, ["attp_execute"]), report.tools);
    const tool = tools.find((t) => t.name === "attp_execute");
    const inputs = Object.keys(tool?.inputSchema?.properties ?? {}).sort();
    checks.check(
      "input schema is code/engine/envelope/reset/session/target/thought",
      isDeepStrictEqual(inputs, ["code", "engine", "envelope", "reset", "session", "target", "thought"]),
      inputs,
    );
    checks.check("output schema has status", "status" in (tool?.outputSchema?.properties ?? {}), tool?.outputSchema);
    checks.check(
      "description lists the tools",
      (tool?.description ?? "").includes("read_file(path, max_lines=1000, offset=0) -> str"),
      tool?.description?.slice(0, 200),
    );

    // tools/call with n8n's extra `toolCallId`. The SDK also validates structuredContent against the
    // tool's outputSchema (it throws if they disagree), so a passing call proves that too.
    const toolCallId = `call_${name.replace("-", "_")}_0001`;
    const call = await client.callTool(
      {
        name: "attp_execute",
        arguments: { code: program(options.folder), target: `ts ${name}`, toolCallId },
      },
      undefined,
      requestOptions,
    );
    const data = call.structuredContent ?? {};
    report.call = { isError: call.isError ?? false, status: data.status, result: data.result, error: data.error };
    checks.check("extra toolCallId argument is accepted", call.isError !== true && data.status === "ok", data.error);
    checks.check(
      "program result",
      isDeepStrictEqual(data.result, expectedResult(options.folder)),
      { got: data.result, want: expectedResult(options.folder) },
    );
    checks.check("target echoed", data.target === `ts ${name}`, data.target);
    checks.check("stdout captured", data.stdout === "rows 4\n", data.stdout);
    const called = (data.calls ?? []).map((c) => c.tool);
    checks.check(
      "calls traced",
      isDeepStrictEqual(called, ["write_file", "read_file", "list_files"]) && data.calls.every((c) => c.ok),
      data.calls,
    );
    // The text block is the lean view as JSON, which n8n's MCP Client node parses the same way.
    const text = textOf(call);
    let lean = null;
    try {
      lean = JSON.parse(text);
    } catch {}
    checks.check(
      "text content is the lean JSON view",
      lean?.status === "ok" &&
        lean?.result?.warmest === "Cairo" &&
        lean?.tool_calls === "write_file: 1, read_file: 1, list_files: 1" &&
        !("calls" in lean) && !("elapsed_ms" in lean),
      text.slice(0, 300),
    );

    // A failing program is a tool result with isError, not a protocol error (an agent sees it and retries).
    const failed = await client.callTool(
      { name: "attp_execute", arguments: { code: 'read_file("no/such/file.txt")', toolCallId: `${toolCallId}b` } },
      undefined,
      requestOptions,
    );
    const failure = failed.structuredContent ?? {};
    checks.check(
      "failing program is isError with FILE_NOT_FOUND",
      failed.isError === true && failure.status === "error" && failure.error?.code === "FILE_NOT_FOUND",
      { isError: failed.isError, status: failure.status, error: failure.error },
    );

    // resources/read of a templated resource, and a not-found one (a JSON-RPC error naming the closest tool).
    const resource = await client.readResource({ uri: "attp://tools/read_file" }, requestOptions);
    const content = resource.contents?.[0] ?? {};
    checks.check(
      "resources/read attp://tools/read_file",
      content.uri === "attp://tools/read_file" &&
        content.mimeType === "text/x-python" &&
        (content.text ?? "").startsWith("def read_file(path: str"),
      content,
    );
    let missing = null;
    try {
      await client.readResource({ uri: "attp://tools/reed_file" }, requestOptions);
    } catch (error) {
      missing = error?.message ?? String(error);
    }
    checks.check("unknown tool resource is an error with a suggestion", /read_file/.test(missing ?? ""), missing);

    // prompts/get
    const prompt = await client.getPrompt({ name: "attp_system_prompt", arguments: { language: "en" } }, requestOptions);
    const promptText = prompt.messages?.[0]?.content?.text ?? "";
    checks.check(
      "prompts/get attp_system_prompt",
      promptText.includes("ATTP") && promptText.includes("def add(a: int, b: int) -> int:"),
      promptText.slice(0, 200),
    );
  } catch (error) {
    report.error = error?.stack ?? String(error);
  } finally {
    await client.close().catch(() => {});
  }
  report.ok = report.error === undefined && checks.ok;
  return report;
}

// One run: every transport it names, in turn; its summary.
async function run(options) {
  const results = [];
  for (const name of options.transports) {
    results.push(await exercise(name, options));
  }
  return {
    ok: results.every((r) => r.ok),
    sdk: `@modelcontextprotocol/sdk@${SDK_VERSION}`,
    headers: Object.keys(options.headers),
    results,
  };
}

async function main() {
  const { batch, runs } = parseCommandLine();
  const summaries = [];
  for (const options of runs) {
    summaries.push(await run(options));
  }
  const ok = summaries.every((s) => s.ok);
  if (batch) {
    for (const summary of summaries) summary.exit_code = summary.ok ? 0 : 1;
    process.stdout.write(`${JSON.stringify({ ok, runs: summaries }, null, 2)}\n`);
    process.exitCode = 0; // each run's own exit code is in its summary
  } else {
    process.stdout.write(`${JSON.stringify(summaries[0], null, 2)}\n`);
    process.exitCode = ok ? 0 : 1;
  }
}

await main();
