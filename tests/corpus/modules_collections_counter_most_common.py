# expect: ok
# needs: imports
from collections import Counter

words = "red blue red green blue red yellow".split()
counts = Counter(words)
__result__ = {"top2": counts.most_common(2), "red": counts["red"], "missing": counts["purple"]}
