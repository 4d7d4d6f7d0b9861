# expect: ok
__result__ = {
    "hyp": math.hypot(3, 4),
    "gcd": math.gcd(48, 180),
    "log2": math.log2(1024),
    "isclose": math.isclose(0.1 + 0.2, 0.3),
    "comb": math.comb(10, 3),
    "ceil_floor": [math.ceil(2.1), math.floor(-2.1)],
    "pi": round(math.pi, 5),
}
