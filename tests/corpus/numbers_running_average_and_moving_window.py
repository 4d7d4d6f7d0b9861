# expect: ok
series = [3, 5, 2, 8, 6, 9, 1, 4]
window = 3
moving = [round(sum(series[i:i + window]) / window, 2) for i in range(len(series) - window + 1)]
running, total = [], 0
for i, v in enumerate(series, 1):
    total += v
    running.append(round(total / i, 2))
__result__ = {"moving": moving, "running": running}
