# expect: ok
due = datetime.datetime(2024, 2, 27, 9, 0)
reminders = [due - datetime.timedelta(days=d) for d in (1, 3, 7)]
__result__ = {"reminders": [r.isoformat() for r in reminders], "next_week": (due + datetime.timedelta(weeks=1)).date().isoformat()}
