# expect: ok
# needs: closures
def make_multiplier(factor):
    def multiply(value):
        return value * factor
    return multiply

double = make_multiplier(2)
triple = make_multiplier(3)
__result__ = {"double": [double(i) for i in range(4)], "triple": triple(7)}
