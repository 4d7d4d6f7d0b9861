# expect: ok
# needs: underscore
rows = [line.split(",") for line in read_file("sales.csv").splitlines()[1:]]
totals = {}
for _, region, _, units, price in rows:
    totals[region] = totals.get(region, 0) + int(units) * float(price)
lines = ["| region | revenue |", "|---|---:|"]
lines += [f"| {r} | {v:,.2f} |" for r, v in sorted(totals.items())]
write_file("reports/regions.md", "\n".join(lines) + "\n")
__result__ = read_file("reports/regions.md")
