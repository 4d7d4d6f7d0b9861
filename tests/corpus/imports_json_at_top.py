# expect: ok
# needs: imports
import json

data = json.loads('{"a": 1, "b": [1, 2]}')
__result__ = json.dumps(data, sort_keys=True)
