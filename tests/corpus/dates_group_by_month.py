# expect: ok
orders = [("2024-01-05", 20.0), ("2024-01-19", 35.5), ("2024-02-02", 12.0), ("2024-03-15", 50.0), ("2024-03-30", 5.5)]
by_month = {}
for day, amount in orders:
    month = datetime.datetime.strptime(day, "%Y-%m-%d").strftime("%Y-%m")
    by_month[month] = by_month.get(month, 0) + amount
__result__ = by_month
