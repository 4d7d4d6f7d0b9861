# expect: ok
def flatten(items):
    out = []
    for item in items:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out

__result__ = flatten([1, [2, [3, [4, 5]], 6], [[7]], 8])
