# expect: ok
hours = [1, 2, 3, 4, 5, 6]
scores = [52, 55, 61, 64, 70, 74]
slope, intercept = statistics.linear_regression(hours, scores)
__result__ = {"r": round(statistics.correlation(hours, scores), 4), "slope": round(slope, 3), "intercept": round(intercept, 3)}
