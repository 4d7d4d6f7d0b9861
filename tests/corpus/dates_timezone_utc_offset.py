# expect: ok
utc = datetime.timezone.utc
plus2 = datetime.timezone(datetime.timedelta(hours=2))
meeting = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=utc)
__result__ = {"utc": meeting.isoformat(), "local": meeting.astimezone(plus2).isoformat()}
