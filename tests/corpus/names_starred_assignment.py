# expect: ok
# needs: starred
first, *middle, last = [1, 2, 3, 4, 5]
head, *tail = "a b c".split()
__result__ = {"first": first, "middle": middle, "last": last, "head": head, "tail": tail}
