# expect: ok
a, b = 1, 2
a, b = b, a
point = (3, 4)
x, y = point
pairs = [(1, "one"), (2, "two")]
lookup = {num: word for num, word in pairs}
__result__ = {"a": a, "b": b, "dist": (x ** 2 + y ** 2) ** 0.5, "lookup": lookup}
