# expect: ok
latencies = [12, 15, 11, 40, 13, 14, 12, 90, 16, 13]
__result__ = {
    "mean": statistics.mean(latencies),
    "median": statistics.median(latencies),
    "stdev": round(statistics.stdev(latencies), 3),
    "mode": statistics.mode(latencies),
    "quantiles": statistics.quantiles(latencies, n=4),
}
