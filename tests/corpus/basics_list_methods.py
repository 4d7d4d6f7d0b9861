# expect: ok
stack = [1, 2, 3]
stack.append(4)
stack.extend([5, 6])
stack.insert(0, 0)
popped = stack.pop()
stack.remove(2)
stack.reverse()
__result__ = {"stack": stack, "popped": popped, "index_of_3": stack.index(3), "count_1": stack.count(1)}
