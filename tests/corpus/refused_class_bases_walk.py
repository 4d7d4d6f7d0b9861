# expect: error FORBIDDEN
__result__ = ().__class__.__bases__[0].__subclasses__()
