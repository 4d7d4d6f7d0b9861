# expect: ok
# needs: imports
from operator import itemgetter

rows = [{"name": "b", "score": 3}, {"name": "a", "score": 9}, {"name": "c", "score": 5}]
best = sorted(rows, key=itemgetter("score"), reverse=True)
pairs = sorted([(2, "b"), (1, "z"), (2, "a")], key=itemgetter(0, 1))
__result__ = {"best": [r["name"] for r in best], "pairs": pairs}
