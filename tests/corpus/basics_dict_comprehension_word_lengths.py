# expect: ok
words = "the quick brown fox jumps over the lazy dog".split()
lengths = {w: len(w) for w in words}
__result__ = lengths
