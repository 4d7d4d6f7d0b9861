# expect: error FORBIDDEN
# message: dict
settings = {"a": 1}
__result__ = settings.__dict__
