# expect: ok
counts = {"the": 12, "cat": 3, "sat": 3, "on": 5, "mat": 2, "a": 9}
top3 = sorted(counts.items(), key=lambda kv: kv[1], reverse=True)[:3]
__result__ = dict(top3)
