# expect: ok
days = [datetime.date(2024, 5, d) for d in range(1, 8)]
__result__ = [{"date": d.isoformat(), "weekday": d.strftime("%a"), "iso_week": d.isocalendar()[1], "weekend": d.weekday() >= 5} for d in days]
