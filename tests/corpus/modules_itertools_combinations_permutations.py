# expect: ok
# needs: imports
import itertools

items = ["a", "b", "c"]
__result__ = {
    "pairs": [list(p) for p in itertools.combinations(items, 2)],
    "orders": len(list(itertools.permutations(items))),
    "product": ["".join(p) for p in itertools.product("xy", repeat=2)],
}
