"""One call, end to end: admission, the envelope, the static check, the worker, tool calls, the result.

Owns: `runtime.Runtime` (the pipeline a face calls: `request` in, `intake` to a program, a worker whose
tool calls `dispatch` answers, `outcome` to the result; `state` is what one run's steps share), the ATTP
envelope and TAM dialects, the server-side checks, admission control and fair slots, the tool threads,
and what operators see of a run: its spans (`tracing`), `metrics`, the `audit` log and `rate_limits`.
May import: `model`, `sessions`, the foundations, `sandbox`. Must never be imported by: `model`,
`sessions`, the foundations, `sandbox` or `toolpacks`.
"""
