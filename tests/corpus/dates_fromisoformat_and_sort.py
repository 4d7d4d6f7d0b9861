# expect: ok
events = ["2024-06-01T09:00:00", "2023-12-31T23:59:59", "2024-01-01T00:00:00"]
ordered = sorted(events, key=datetime.datetime.fromisoformat)
span = datetime.datetime.fromisoformat(ordered[-1]) - datetime.datetime.fromisoformat(ordered[0])
__result__ = {"ordered": ordered, "span_days": span.days, "span_seconds": span.total_seconds()}
