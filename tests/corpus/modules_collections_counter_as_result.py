# expect: ok
from collections import Counter

__result__ = Counter(["a", "b", "a"])
