# expect: ok
rows = [line.split(",") for line in read_file("sales.csv").splitlines()[1:]]
months = {}
for date, region, product, units, price in rows:
    month = date[:7]
    months[month] = months.get(month, 0) + int(units) * float(price)
report = "\n".join(f"{m}: {v:.2f}" for m, v in sorted(months.items()))
write_file("reports/monthly.txt", report + "\n")
__result__ = {"written": read_file("reports/monthly.txt"), "best": max(months, key=months.get)}
