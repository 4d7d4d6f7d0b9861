# expect: ok
docs = ["alpha", "beta", "alpha", "gamma", "beta"]
seen = {}
for i, d in enumerate(docs):
    digest = hashlib.sha256(d.encode()).hexdigest()
    seen.setdefault(digest, []).append(i)
__result__ = sorted(v for v in seen.values() if len(v) > 1)
