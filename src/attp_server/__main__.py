"""`python -m attp_server` is the `attp` command."""

from attp_server.faces.cli import cli

cli()
