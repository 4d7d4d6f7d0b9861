# expect: ok
rows = [("north", 120), ("south", 95), ("east", 120), ("west", 80)]
ordered = sorted(rows, key=lambda r: (-r[1], r[0]))
__result__ = ordered
