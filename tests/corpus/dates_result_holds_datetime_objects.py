# expect: ok
# result: {"start": "2024-05-01T09:30:00", "day": "2024-05-01", "length": 5400.0}
start = datetime.datetime(2024, 5, 1, 9, 30)
__result__ = {"start": start, "day": start.date(), "length": datetime.timedelta(hours=1, minutes=30)}
