"""What the model reads: the tool description (`catalog`), signatures and docstrings, ATDF, the prompt,
the skills library and the rendered result.

Owns: every text the model sees outside a run's own output.
May import: the foundations and `sandbox` (names of curated modules, the Starlark engine's presence).
Must never be imported by: the foundations or `sandbox`.
"""
