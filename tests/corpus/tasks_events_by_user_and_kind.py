# expect: ok
# needs: imports
from collections import Counter, defaultdict
import json
import statistics

events = [json.loads(l) for l in read_file("data/events.jsonl").splitlines()]
per_user = defaultdict(Counter)
for e in events:
    per_user[e["user"]][e["kind"]] += 1
buyers = sorted(u for u, c in per_user.items() if c["buy"] >= 2)
__result__ = {"buyers": buyers, "median_latency": statistics.median(e["latency_ms"] for e in events)}
