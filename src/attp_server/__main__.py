"""`python -m attp_server` is the `attp` command.

The cyclic garbage collector is off while the modules load: they allocate hundreds of thousands of
objects that live as long as the process and that no collection could free, and collecting them again
and again costs about a fifth of the start's CPU time. `cli` then freezes them out of all later
collections.
"""

import gc

gc.disable()
try:
    from attp_server.faces.cli import cli
finally:
    gc.enable()

cli()
