# expect: ok
# needs: imports
import bisect

breakpoints = [60, 70, 80, 90]
letters = "FDCBA"

def grade(score):
    return letters[bisect.bisect(breakpoints, score)]

sorted_list = [1, 3, 5]
bisect.insort(sorted_list, 4)
__result__ = {"grades": [grade(s) for s in [33, 99, 77, 70, 89, 90, 100]], "inserted": sorted_list}
