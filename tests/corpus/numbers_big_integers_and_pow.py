# expect: ok
__result__ = {"fact20": math.factorial(20), "two_100": str(2 ** 100), "pow_mod": pow(3, 200, 1000), "digits": len(str(math.factorial(50)))}
