# expect: error FORBIDDEN
def numbers():
    yield 1
    yield 2

__result__ = list(numbers())
