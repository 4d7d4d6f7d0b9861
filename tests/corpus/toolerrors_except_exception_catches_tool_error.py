# expect: ok
try:
    read_file("missing.txt")
    outcome = "read"
except Exception as e:
    outcome = f"failed: {e}"
__result__ = outcome.startswith("failed: File 'missing.txt' does not exist")
