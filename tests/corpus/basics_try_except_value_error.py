# expect: ok
raw = ["10", "x", "3.5", "", "7"]
parsed, bad = [], []
for item in raw:
    try:
        parsed.append(int(item))
    except ValueError:
        bad.append(item)
__result__ = {"parsed": parsed, "bad": bad}
