# expect: ok
matrix = [[r * 3 + c for c in range(3)] for r in range(3)]
transposed = [[row[i] for row in matrix] for i in range(3)]
flat = [x for row in matrix for x in row]
__result__ = {"matrix": matrix, "transposed": transposed, "flat": flat}
