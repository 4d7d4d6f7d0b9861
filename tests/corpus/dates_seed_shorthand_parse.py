# expect: ok
# result: {"year": 2024, "month": 5, "weekday": 2}
d = datetime.parse("2024-05-01T12:30:00")
__result__ = {"year": d.year, "month": d.month, "weekday": d.weekday()}
