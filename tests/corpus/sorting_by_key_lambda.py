# expect: ok
people = [
    {"name": "Ana", "age": 34},
    {"name": "Bo", "age": 27},
    {"name": "Chen", "age": 41},
]
by_age = sorted(people, key=lambda p: p["age"])
__result__ = [p["name"] for p in by_age]
