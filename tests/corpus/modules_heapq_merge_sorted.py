# expect: ok
__result__ = list(heapq.merge([1, 4, 9], [2, 3, 10], [5]))
