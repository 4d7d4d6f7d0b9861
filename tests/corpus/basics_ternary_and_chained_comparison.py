# expect: ok
def grade(score):
    return "A" if score >= 90 else "B" if 80 <= score < 90 else "C"

__result__ = [grade(s) for s in [95, 85, 70, 90, 80]]
