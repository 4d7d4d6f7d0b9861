# expect: ok
# needs: imports
import copy

original = {"a": [1, 2], "b": {"c": 3}}
shallow = copy.copy(original)
deep = copy.deepcopy(original)
original["a"].append(99)
__result__ = {"shallow_a": shallow["a"], "deep_a": deep["a"], "deep_b": deep["b"]}
