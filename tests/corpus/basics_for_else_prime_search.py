# expect: ok
primes = []
for n in range(2, 50):
    for d in range(2, int(n ** 0.5) + 1):
        if n % d == 0:
            break
    else:
        primes.append(n)
__result__ = primes
