# expect: ok
# needs: imports
from itertools import zip_longest, pairwise

a = [1, 2, 3]
b = ["x"]
__result__ = {"zipped": list(zip_longest(a, b, fillvalue="-")), "steps": [y - x for x, y in pairwise([1, 4, 9, 16])]}
