# expect: ok
# needs: underscore
grid = [[0 for _ in range(3)] for _ in range(2)]
__result__ = grid
