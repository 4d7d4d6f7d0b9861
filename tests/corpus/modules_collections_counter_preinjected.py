# expect: ok
letters = collections.Counter("mississippi")
__result__ = dict(sorted(letters.items()))
