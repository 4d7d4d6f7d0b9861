# expect: ok
defaults = {"timeout": 30, "retries": 3, "verbose": False}
overrides = {"retries": 5, "verbose": True}
merged = {**defaults, **overrides}
copy = dict(defaults)
copy.update(overrides)
__result__ = {"merged": merged, "same": merged == copy, "union": defaults | overrides}
