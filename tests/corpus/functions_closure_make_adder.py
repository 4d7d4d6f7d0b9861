# expect: ok
# needs: closures
def make_adder(n):
    return lambda x: x + n

add5 = make_adder(5)
add10 = make_adder(10)
__result__ = [add5(1), add10(1), make_adder(-1)(1)]
