# expect: ok
start = datetime.date(2024, 1, 15)
end = datetime.date(2024, 3, 1)
delta = end - start
__result__ = {"days": delta.days, "weeks": delta.days // 7}
