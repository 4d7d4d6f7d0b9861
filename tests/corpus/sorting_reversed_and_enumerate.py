# expect: ok
steps = ["wake", "coffee", "code", "sleep"]
__result__ = [f"{i}:{s}" for i, s in enumerate(reversed(steps))]
