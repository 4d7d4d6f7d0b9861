# expect: ok
# needs: underscore
levels = {}
slowest = []
for line in read_file("app.log").splitlines():
    parts = line.split()
    levels[parts[1]] = levels.get(parts[1], 0) + 1
    ms = int(parts[-1].rstrip("ms"))
    slowest.append((ms, line))
slowest.sort(reverse=True)
__result__ = {"levels": levels, "slowest": [l for _, l in slowest[:2]]}
