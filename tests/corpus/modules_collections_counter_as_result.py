# expect: ok
# needs: modules
from collections import Counter

__result__ = Counter(["a", "b", "a"])
