# expect: ok
# needs: imports
def mean_and_spread(values):
    import math
    import statistics
    return {"mean": statistics.mean(values), "range": max(values) - min(values), "sqrt_n": math.sqrt(len(values))}

__result__ = mean_and_spread([2, 4, 4, 4, 5, 5, 7, 9])
