# expect: ok
# needs: global
counter = 0

def bump(by=1):
    global counter
    counter += by
    return counter

bump()
bump(5)
__result__ = counter
