# expect: ok
# needs: imports
from functools import reduce, partial

product = reduce(lambda a, b: a * b, [1, 2, 3, 4, 5], 1)

def power(base, exponent):
    return base ** exponent

square = partial(power, exponent=2)
__result__ = {"product": product, "squares": [square(n) for n in range(5)]}
