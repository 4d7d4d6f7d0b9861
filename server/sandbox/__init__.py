"""The sandbox: layer 1 (evaluator policy, curated namespaces) runs in worker processes (layer 2).

Worker-side modules (worker, evaluator, policy, namespaces, jsonify, lockdown, limits, protocol, and the
Starlark engine: starlark_engine, starlark_source) import nothing from the rest of ``server``; only `pool`
is server-side.
"""
