# expect: ok
# needs: imports
from collections import Counter

__result__ = Counter(["a", "b", "a"])
