"""The ``python`` engine: a checked program rewritten with guards, compiled by CPython, run under the sandbox's rules.

Owns: `transform` (the walk that rewrites a checked tree) and `rules` (what each node becomes), `guards` (what the
rewritten code calls where the policy needs a look at a value: attributes, text, size-checked operators, exceptions,
imports), `table` (every node a program may hold and its rule, in one place), `evaluator` (a program compiled once,
run under the deadline, the recursion limit and the output cap), and `engine`, the worker's side of the engine (the
static check, kept names, one run). Nothing of asteval's evaluation runs here.
Runs in the worker. May import: the rest of `attp_server.sandbox` only. Must never import anything
above `sandbox`.
"""
