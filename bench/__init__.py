"""Benchmarks: `python -m bench`."""
