# expect: ok
# needs: imports
from collections import Counter
import re

lines = read_file("app.log").splitlines()
levels = Counter(line.split()[1] for line in lines)
endpoints = Counter(m.group(1) for line in lines if (m := re.search(r"(?:GET|POST) (\S+)", line)))
durations = [int(m.group(1)) for line in lines if (m := re.search(r"(\d+)ms$", line))]
__result__ = {
    "levels": dict(levels),
    "top_endpoint": endpoints.most_common(1)[0],
    "p_max": max(durations),
    "error_rate": round(levels["ERROR"] / len(lines), 3),
}
