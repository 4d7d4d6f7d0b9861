# expect: ok
# needs: imports
from collections import defaultdict

groups = defaultdict(list)
for name, team in [("ana", "red"), ("bo", "blue"), ("chen", "red")]:
    groups[team].append(name)
__result__ = dict(groups)
