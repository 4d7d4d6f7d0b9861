# expect: ok
raw = "  apples, pears ,bananas,  kiwis  "
items = [s.strip() for s in raw.split(",")]
__result__ = {"items": items, "joined": " | ".join(items), "upper": [i.upper() for i in items]}
