"""Who reaches what: the ``[access.NAME]`` rules (SPEC §17) applied to a principal and its groups.

Owns: `policy.py` (the rules a principal matches, and the `Grant` they add up to: the ``pack.tool`` patterns it
reaches, and the engines, approval mode and rate limit that hold for it) and `view.py` (a registry as one principal
sees it: only the tools it reaches; the rest withheld, refused as absent and audited). The rules are read from the
configuration (`attp_server.access_config`) and applied live when it is edited.

May import: the foundations only. Imported by `run` (each call runs on its caller's view, and help() and tools()
answer from it) and `faces` (each caller's tool description and resources). Nothing below `run` imports it.
"""
