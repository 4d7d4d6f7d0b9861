# expect: ok
data = list(range(10))
it = iter(data)
batches = []
while True:
    batch = list(itertools.islice(it, 4))
    if not batch:
        break
    batches.append(batch)
__result__ = batches
