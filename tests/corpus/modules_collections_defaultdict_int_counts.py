# expect: ok
counts = collections.defaultdict(int)
for ch in "hello world":
    if ch != " ":
        counts[ch] += 1
__result__ = dict(counts)
