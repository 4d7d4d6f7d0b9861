# expect: ok
memo = {0: 0, 1: 1}

def fib(n):
    if n not in memo:
        memo[n] = fib(n - 1) + fib(n - 2)
    return memo[n]

__result__ = [fib(n) for n in (10, 30, 60)]
