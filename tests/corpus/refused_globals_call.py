# expect: error FORBIDDEN
__result__ = list(globals())
