# expect: ok
# needs: closures
def compose(*functions):
    def composed(x):
        for f in reversed(functions):
            x = f(x)
        return x
    return composed

pipeline = compose(str.upper, str.strip, lambda s: s.replace("-", " "))
__result__ = pipeline("  hello-world  ")
