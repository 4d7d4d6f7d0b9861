# expect: error FORBIDDEN
__result__ = eval("1 + 1")
