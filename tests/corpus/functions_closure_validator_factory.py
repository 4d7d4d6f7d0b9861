# expect: ok
# needs: closures
def between(low, high):
    def check(value):
        return low <= value <= high
    return check

rules = {"age": between(0, 130), "score": between(0, 100)}
record = {"age": 34, "score": 120}
__result__ = {field: rules[field](value) for field, value in record.items()}
