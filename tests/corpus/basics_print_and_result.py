# expect: ok
total = 0
for i in range(1, 6):
    total += i
    print(f"after {i}: {total}")
__result__ = total
