# expect: ok
def summarize(*numbers, **options):
    total = sum(numbers)
    if options.get("average"):
        return total / len(numbers)
    return total

__result__ = [summarize(1, 2, 3), summarize(4, 6, average=True), summarize(*[10, 20], **{"average": False})]
