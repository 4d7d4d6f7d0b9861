"""`python -m attp_server` is the `attp` command."""

from attp_server.cli import cli

cli()
