# expect: ok
# needs: imports
from collections import Counter

a = Counter(apples=3, pears=1)
b = Counter(apples=1, kiwis=2)
__result__ = {"sum": dict(a + b), "diff": dict(a - b), "total": sum((a + b).values())}
