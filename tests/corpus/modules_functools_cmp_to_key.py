# expect: ok
# needs: imports
from functools import cmp_to_key

def compare(a, b):
    if len(a) != len(b):
        return len(a) - len(b)
    return -1 if a < b else (1 if a > b else 0)

__result__ = sorted(["pear", "fig", "apple", "kiwi", "date"], key=cmp_to_key(compare))
