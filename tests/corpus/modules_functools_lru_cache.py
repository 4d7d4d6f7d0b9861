# expect: ok
# needs: imports, decorators
from functools import lru_cache

@lru_cache(maxsize=None)
def ways(n):
    if n < 0:
        return 0
    if n == 0:
        return 1
    return ways(n - 1) + ways(n - 2) + ways(n - 3)

__result__ = [ways(n) for n in range(10)]
