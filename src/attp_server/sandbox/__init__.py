"""The sandbox: where a program runs, and the two walls around it.

`policy` (what a program may write and touch) and `static_check` (what is refused before anything
runs) are the boundary in one glance; `limits`, `advice` and `suggestions` are shared by every part.
The parts: `engines/` (the table of engines, and one folder each: `python/` the evaluator, `asteval/`, `starlark/`),
`stdlib/` (the curated modules), `process/` (the worker, its lockdown, the tools as a program sees them, and the
server-side pool).

Everything here except `process.pool` runs inside worker processes and imports nothing from the rest
of `attp_server` (tests/test_architecture.py enforces it), so a worker starts without pydantic or the
MCP SDK, and a security reviewer reads only this folder.
"""
