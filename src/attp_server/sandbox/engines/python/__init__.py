"""The ``python`` engine: a program's AST compiled once into Python closures, run under the sandbox's rules.

Owns: scopes, expressions, statements, control flow, calls, functions and definitions, and the
`evaluator.Evaluator` that ties them together (it replaced asteval's tree walk; nothing of asteval runs here).
`table` lists every node a program may hold and the function that compiles it, in one place; `engine` is the
worker's side of the engine (the static check, kept names, one run).
Runs in the worker. May import: the rest of `attp_server.sandbox` only. Must never import anything
above `sandbox`.
"""
