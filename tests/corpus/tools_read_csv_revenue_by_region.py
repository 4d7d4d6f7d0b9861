# expect: ok
text = read_file("sales.csv")
lines = text.strip().splitlines()
header = lines[0].split(",")
revenue = {}
for line in lines[1:]:
    row = dict(zip(header, line.split(",")))
    revenue[row["region"]] = revenue.get(row["region"], 0) + int(row["units"]) * float(row["price"])
__result__ = {region: round(total, 2) for region, total in sorted(revenue.items(), key=lambda kv: -kv[1])}
