# expect: ok
# needs: closures, decorators
def memoize(fn):
    cache = {}
    def wrapper(n):
        if n not in cache:
            cache[n] = fn(n)
        return cache[n]
    return wrapper

@memoize
def slow_square(n):
    return n * n

__result__ = [slow_square(i) for i in [3, 4, 3]]
