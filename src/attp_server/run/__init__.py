"""One call, end to end: admission, the envelope, the static check, the worker, tool calls, the result.

Owns: `runtime.Runtime` (the pipeline a face calls: `request` in, `intake` to a program, `evaluation` on a worker
whose tool calls `dispatch` answers, `outcome` to the result; `state` is what one run's steps share), the ATTP
envelope and TAM dialects, the server-side checks, admission control and fair slots, the tool threads, applying
configuration edits while serving (`reload`), and building it all at start (`startup`).
May import: `ops`, `model`, `sessions`, the foundations, `sandbox`. Must never be imported by: `ops`, `model`,
`sessions`, the foundations, `sandbox` or `toolpacks`.
"""
