# expect: ok
# needs: imports
import json
from operator import itemgetter

people = json.loads(read_file("people.json"))
people.sort(key=itemgetter("age"), reverse=True)
lines = [f"{p['name']:<6}{p['age']:>4}  {p['city']}" for p in people]
print("\n".join(lines))
__result__ = [p["name"] for p in people[:3]]
