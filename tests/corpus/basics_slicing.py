# expect: ok
data = list(range(20))
__result__ = {
    "first_five": data[:5],
    "last_three": data[-3:],
    "every_third": data[::3],
    "reversed_tail": data[:-6:-1],
    "text": "hello world"[::-1],
}
