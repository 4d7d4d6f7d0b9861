# expect: error FORBIDDEN
__result__ = getattr("text", "upper")()
