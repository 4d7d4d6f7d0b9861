"""`python -m server` is the `attp` command."""

from server.cli import cli

cli()
