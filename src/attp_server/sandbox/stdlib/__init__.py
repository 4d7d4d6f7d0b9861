"""The curated modules a program may import (`math`, `json`, `re`, `collections`, `csv`, ...) and its builtins.

Owns: every namespace a run is given; none is a real module, each is a read-only bag of chosen
callables with their size checks.
Runs in the worker. May import: the rest of `attp_server.sandbox` only.
"""
