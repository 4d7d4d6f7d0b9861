#!/usr/bin/env node
// Sessions from a client nobody here wrote: the official TypeScript SDK (@modelcontextprotocol/sdk 1.x) against an
// attp-server started with `--approval destructive`. The client declares the elicitation capability and answers
// every elicitation with --answer (accept, accept-for-session, decline). Over one connection it runs:
//   1. `x = 41` (a variable the session keeps),
//   2. a program that writes a file (the server asks the user first) and reads back `x + 1`,
//   3. the same write again (asked again, unless the first answer allowed the tool for the session).
// It prints one JSON summary: per transport the questions it was asked and each call's status, result and error.
//
//   node ts_approval.mjs --url http://127.0.0.1:8765 --answer accept [--transport sse|streamable-http|both]
//                        [--folder clients/ts-approval]
//
// With --answer given more than once, it does all that for each answer in turn (new connections each time; the
// folder gets the answer appended, `FOLDER-ANSWER`), in this one process (a Node start with the SDK costs more
// CPU than a run), and prints {"runs": [summary, ...]}, each summary as a run with only that answer prints it.
//
// Exit codes: 0 the summary was printed (the test judges it), 1 a connection failed, 2 bad usage.

import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const TRANSPORTS = {
  sse: (base) => new SSEClientTransport(new URL("/sse", base)),
  "streamable-http": (base) => new StreamableHTTPClientTransport(new URL("/mcp", base)),
};
const ANSWERS = {
  accept: { action: "accept", content: { allow_for_session: false } },
  "accept-for-session": { action: "accept", content: { allow_for_session: true } },
  decline: { action: "decline" },
};

function usage(message) {
  process.stderr.write(`ts_approval: ${message}\n`);
  process.exit(2);
}

function parseCommandLine() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        url: { type: "string" },
        answer: { type: "string", multiple: true, default: [] },
        transport: { type: "string", default: "both" },
        folder: { type: "string", default: "clients/ts-approval" },
      },
      strict: true,
    }).values;
  } catch (error) {
    usage(error.message);
  }
  if (!parsed.url) usage("--url is required");
  if (parsed.answer.length === 0) usage("--answer is required");
  for (const answer of parsed.answer) {
    if (!(answer in ANSWERS)) usage(`--answer is one of ${Object.keys(ANSWERS).join(", ")}`);
  }
  const transports = parsed.transport === "both" ? Object.keys(TRANSPORTS) : [parsed.transport];
  for (const name of transports) if (!(name in TRANSPORTS)) usage(`unknown transport ${JSON.stringify(name)}`);
  const several = parsed.answer.length > 1;
  return parsed.answer.map((answer) => ({
    url: parsed.url,
    answer,
    transports,
    folder: several ? `${parsed.folder}-${answer}` : parsed.folder,
  }));
}

function outcome(result) {
  const data = result.structuredContent ?? {};
  return { isError: result.isError ?? false, status: data.status, result: data.result, error: data.error ?? null };
}

async function exercise(name, options) {
  const report = { transport: name, questions: [], calls: [] };
  const client = new Client({ name: "attp-ts-approval", version: "1.0.0" }, { capabilities: { elicitation: {} } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    report.questions.push({ message: request.params.message, schema: request.params.requestedSchema });
    return ANSWERS[options.answer];
  });
  try {
    await client.connect(TRANSPORTS[name](options.url));
  } catch (error) {
    report.error = `connect: ${error?.message ?? String(error)}`;
    return report;
  }
  try {
    const path = `${options.folder}-${name}.txt`;
    const write = `write_file(${JSON.stringify(path)}, "approved")\n__result__ = x + 1`;
    for (const code of ["x = 41\n__result__ = x", write, write]) {
      const result = await client.callTool({ name: "attp_execute", arguments: { code } }, undefined, { timeout: 30000 });
      report.calls.push(outcome(result));
    }
  } catch (error) {
    report.error = error?.stack ?? String(error);
  } finally {
    await client.close().catch(() => {});
  }
  return report;
}

const runs = [];
for (const options of parseCommandLine()) {
  const results = [];
  for (const name of options.transports) results.push(await exercise(name, options));
  runs.push({ answer: options.answer, results });
}
process.stdout.write(`${JSON.stringify(runs.length === 1 ? runs[0] : { runs }, null, 2)}\n`);
process.exitCode = runs.some((run) => run.results.some((r) => r.error?.startsWith("connect:"))) ? 1 : 0;
