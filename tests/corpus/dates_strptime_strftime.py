# expect: ok
stamps = ["2024-05-01 14:30", "2024-12-25 08:05"]
parsed = [datetime.datetime.strptime(s, "%Y-%m-%d %H:%M") for s in stamps]
__result__ = [p.strftime("%d %b %Y, %H:%M (%A)") for p in parsed]
