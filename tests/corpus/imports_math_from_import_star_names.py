# expect: ok
# needs: imports
from math import sqrt, pi, floor

__result__ = {"circle": round(pi * 2 ** 2, 3), "root": sqrt(81), "floor": floor(3.7)}
