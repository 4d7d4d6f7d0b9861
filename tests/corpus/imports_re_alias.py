# expect: ok
# needs: imports
import re as regex

__result__ = regex.findall(r"\b\w{5}\b", "these words have exactly five letter words: quick brown jumps")
