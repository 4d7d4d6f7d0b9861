# expect: ok
values = sorted([5, 1, 9, 3, 7, 2, 8, 6, 4, 10])

def percentile(sorted_values, p):
    k = (len(sorted_values) - 1) * p / 100
    f = math.floor(k)
    c = math.ceil(k)
    if f == c:
        return sorted_values[int(k)]
    return sorted_values[f] + (sorted_values[c] - sorted_values[f]) * (k - f)

__result__ = {p: percentile(values, p) for p in (50, 90, 99)}
