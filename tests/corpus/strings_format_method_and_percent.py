# expect: ok
template = "{name} is {age} years old"
line = template.format(name="Ana", age=34)
old = "%s has %d items costing %.2f" % ("cart", 3, 9.5)
__result__ = [line, old, "{:<6}|{:^6}|{:>6}".format("a", "b", "c")]
