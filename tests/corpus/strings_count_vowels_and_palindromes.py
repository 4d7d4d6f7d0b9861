# expect: ok
words = ["level", "python", "racecar", "noon", "attp"]
__result__ = {
    "palindromes": [w for w in words if w == w[::-1]],
    "vowels": {w: sum(c in "aeiou" for c in w) for w in words},
}
