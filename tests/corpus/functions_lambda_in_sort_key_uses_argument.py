# expect: ok
def sort_by(rows, field, descending=False):
    return sorted(rows, key=lambda r: r[field], reverse=descending)

rows = [{"n": "b", "v": 2}, {"n": "a", "v": 3}, {"n": "c", "v": 1}]
__result__ = {"by_n": [r["n"] for r in sort_by(rows, "n")], "by_v": [r["n"] for r in sort_by(rows, "v", True)]}
