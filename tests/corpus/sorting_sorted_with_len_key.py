# expect: ok
phrases = ["a", "abc", "ab", "abcd", ""]
__result__ = {"by_len": sorted(phrases, key=len), "longest": max(phrases, key=len)}
