# expect: ok
# needs: imports, modules
from collections import Counter

__result__ = Counter(["a", "b", "a"])
