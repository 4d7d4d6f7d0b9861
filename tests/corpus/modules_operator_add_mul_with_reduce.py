# expect: ok
# needs: imports
import functools
import operator

__result__ = {"sum": functools.reduce(operator.add, [1, 2, 3]), "product": functools.reduce(operator.mul, range(1, 6))}
