# expect: error FORBIDDEN
f = lambda: 0
__result__ = f.__globals__
