# expect: ok
values = [1, 5, 12, 7, 30]
big = [y for x in values if (y := x * 3) > 15]
__result__ = big
