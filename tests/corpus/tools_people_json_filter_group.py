# expect: ok
people = json.loads(read_file("people.json"))
by_city = {}
for p in people:
    by_city.setdefault(p["city"], []).append(p["name"])
no_email = [p["name"] for p in people if not p["email"]]
__result__ = {"by_city": by_city, "no_email": no_email, "avg_age": statistics.mean(p["age"] for p in people)}
