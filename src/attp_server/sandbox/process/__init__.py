"""The worker process and the server's pool of them: the second wall.

Owns: `pool` (server side: start, feed, time and kill workers, and decide which serves again), `inbound` (server
side: what the server accepts from a worker, each message checked before any work), `forkserver` (server side:
workers forked from one process that has loaded what they load), `worker` (the process's main loop, and the fork
server's), `fallen` (a test hook: workers that run programs as plain CPython after their lockdown),
`lockdown` (what a worker gives up before its first program), `protocol` (the JSON-line messages),
the deadline signal, the checked-program cache, kept-state collection and JSON conversion.
Everything but `pool`, `inbound` and `forkserver` runs in a worker (or the fork server) and imports nothing above
`sandbox`.
"""
