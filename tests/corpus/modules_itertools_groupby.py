# expect: ok
# needs: imports, underscore
from itertools import groupby

rows = [("2024-01", 10), ("2024-01", 5), ("2024-02", 7), ("2024-03", 1), ("2024-03", 2)]
totals = {month: sum(v for _, v in group) for month, group in groupby(rows, key=lambda r: r[0])}
__result__ = totals
