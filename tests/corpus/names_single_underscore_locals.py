# expect: ok
# needs: underscore
def normalize(values):
    _total = sum(values)
    _scale = 100 / _total
    return [round(v * _scale, 1) for v in values]

__result__ = normalize([1, 1, 2])
