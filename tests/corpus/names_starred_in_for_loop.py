# expect: ok
# needs: starred
records = [("ana", 1, 2, 3), ("bo", 4, 5)]
totals = {}
for name, *scores in records:
    totals[name] = sum(scores)
__result__ = totals
