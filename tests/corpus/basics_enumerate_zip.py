# expect: ok
names = ["Ana", "Bo", "Chen"]
scores = [88, 92, 79]
ranked = []
for i, (name, score) in enumerate(zip(names, scores), start=1):
    ranked.append(f"{i}. {name}: {score}")
__result__ = ranked
