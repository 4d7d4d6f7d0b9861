"""The worker process and the server's pool of them: the second wall.

Owns: `pool` (server side: start, feed, time and kill workers), `forkserver` (server side: workers forked
from one process that has loaded what they load), `worker` (the process's main loop, and the fork server's),
`lockdown` (what a worker gives up before its first program), `protocol` (the JSON-line messages),
the deadline signal, the checked-program cache, kept-state collection and JSON conversion.
Everything but `pool` and `forkserver` runs in a worker (or the fork server) and imports nothing above `sandbox`.
"""
