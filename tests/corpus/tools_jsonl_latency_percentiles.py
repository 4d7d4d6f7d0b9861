# expect: ok
events = [json.loads(line) for line in read_file("data/events.jsonl").splitlines() if line.strip()]
latencies = sorted(e["latency_ms"] for e in events)

def pct(p):
    return latencies[min(len(latencies) - 1, int(round(p / 100 * (len(latencies) - 1))))]

by_kind = {}
for e in events:
    by_kind.setdefault(e["kind"], []).append(e["latency_ms"])
__result__ = {"p50": pct(50), "p95": pct(95), "mean_by_kind": {k: round(statistics.mean(v), 1) for k, v in sorted(by_kind.items())}}
