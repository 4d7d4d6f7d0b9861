# expect: ok
def age(born, on):
    years = on.year - born.year
    if (on.month, on.day) < (born.month, born.day):
        years -= 1
    return years

today = datetime.date(2024, 5, 1)
__result__ = {name: age(datetime.date(*b), today) for name, b in {"ana": (1990, 5, 2), "bo": (1997, 1, 30)}.items()}
