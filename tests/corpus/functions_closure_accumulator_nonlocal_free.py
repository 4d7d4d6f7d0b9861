# expect: ok
# needs: closures
def make_accumulator():
    items = []
    def add(x):
        items.append(x)
        return len(items)
    return add

acc = make_accumulator()
acc("a")
acc("b")
__result__ = acc("c")
