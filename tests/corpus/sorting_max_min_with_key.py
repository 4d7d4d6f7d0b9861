# expect: ok
scores = {"ana": 88, "bo": 95, "chen": 79, "dara": 95}
best = max(scores, key=scores.get)
worst = min(scores.items(), key=lambda kv: kv[1])
__result__ = {"best": best, "worst": worst[0]}
