# expect: ok
lines = ["id;label", "1;alpha", "2;beta"]
reader = csv.DictReader(lines, delimiter=";")
__result__ = [dict(r) for r in reader]
