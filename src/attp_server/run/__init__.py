"""One call, end to end: admission, the envelope, the static check, the worker, tool calls, the result.

Owns: `runtime.Runtime` (the pipeline a face calls), the ATTP envelope and TAM dialects, the
server-side checks, admission control and fair slots, and the dispatch of a program's tool calls.
May import: `model`, `sessions`, the foundations, `sandbox`. Must never be imported by: `model`,
`sessions`, the foundations, `sandbox` or `toolpacks`.
"""
