# expect: ok
def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps

__result__ = {n: collatz_steps(n) for n in [6, 7, 27]}
