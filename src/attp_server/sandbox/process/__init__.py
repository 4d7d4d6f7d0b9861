"""The worker process and the server's pool of them: the second wall.

Owns: `pool` (server side: start, feed, time and kill workers), `worker` (the process's main loop),
`lockdown` (what a worker gives up before its first program), `protocol` (the JSON-line messages),
the deadline signal, the checked-program cache, kept-state collection and JSON conversion.
Everything but `pool` runs in the worker and imports nothing above `sandbox`.
"""
