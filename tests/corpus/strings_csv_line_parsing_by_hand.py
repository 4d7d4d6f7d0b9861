# expect: ok
# needs: starred
data = """name,city,score
Ana,Lisbon,88
Bo,Oslo,92
Chen,Lisbon,79"""
header, *rows = data.splitlines()
keys = header.split(",")
records = [dict(zip(keys, r.split(","))) for r in rows]
by_city = {}
for r in records:
    by_city.setdefault(r["city"], []).append(int(r["score"]))
__result__ = {city: sum(s) / len(s) for city, s in by_city.items()}
