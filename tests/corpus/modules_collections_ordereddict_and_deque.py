# expect: ok
# needs: imports
from collections import OrderedDict, deque

recent = deque(maxlen=3)
for page in ["home", "about", "blog", "contact", "home"]:
    recent.append(page)
od = OrderedDict()
od["b"] = 1
od["a"] = 2
od.move_to_end("b")
__result__ = {"recent": list(recent), "order": list(od.keys())}
