# expect: ok
# needs: underscore
rows = []
for _ in range(3):
    rows.append("row")
__result__ = rows
