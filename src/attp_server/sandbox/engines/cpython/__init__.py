"""The ``cpython`` engine: the program is real CPython, in a worker process behind both kernel walls.

Owns: what a data-stack worker loads before its walls close (`preload`: the standard library modules that work
without files or network, the operator's packages, and what they load lazily from disk), the fixes those
packages need to run without files and threads (`compat`), the worker's file layer (`files`: ``open``, ``os``,
``pathlib`` and ``glob`` reach workspace files through the files pack's tools), the pictures a program shows
(`pictures`), what a handle keeps of its runs (`keep`: pickles, opaque to the server), data made JSON (`plain`),
the worker's own event loop (`loop`) and one run (`engine`).

Nothing here is a wall: the program can change anything in its process. The walls are the worker's lockdown
(Landlock, seccomp, no network, no privileges), a process per run, and a server that trusts nothing the
worker sends.
Runs in the worker. May import: the rest of `attp_server.sandbox` only.
"""
