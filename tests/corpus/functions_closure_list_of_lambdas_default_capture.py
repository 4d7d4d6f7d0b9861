# expect: ok
handlers = [lambda x, i=i: x * i for i in range(4)]
__result__ = [h(10) for h in handlers]
