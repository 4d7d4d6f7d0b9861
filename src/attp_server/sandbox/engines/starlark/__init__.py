"""The Starlark engine (``engine = "starlark"``): starlark-pyo3 in the worker, under the same contract.

Runs in the worker. May import: the rest of `attp_server.sandbox` only.
"""
