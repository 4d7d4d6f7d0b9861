# expect: ok
# needs: imports
import csv
from collections import defaultdict

rows = list(csv.DictReader(read_file("sales.csv").splitlines()))
by_product = defaultdict(float)
units = defaultdict(int)
for row in rows:
    by_product[row["product"]] += int(row["units"]) * float(row["price"])
    units[row["product"]] += int(row["units"])
report = {p: {"revenue": round(v, 2), "units": units[p]} for p, v in sorted(by_product.items(), key=lambda kv: -kv[1])}
__result__ = report
