"""The ways in: the MCP server (`app`), its HTTP transports (`http`), the `attp` command (`cli`), and what they print.

Owns: turning a request (an MCP ``tools/call``, an HTTP request, a command line) into a call of
`attp_server.run.runtime.Runtime` and its result back into what the caller reads; client
configuration snippets, the registry manifest, elicitation of approvals, signals, logging.
May import: every other part. Must never be imported by: `run`, `model`, `sessions`, the foundations,
`sandbox` or `toolpacks` (nothing below a face knows MCP, HTTP or argparse).
"""
