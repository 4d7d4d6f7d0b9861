# expect: ok
# needs: imports
import json

write_file("cfg/a.json", json.dumps({"timeout": 5, "name": "a"}))
write_file("cfg/b.json", json.dumps({"timeout": 9}))
write_file("cfg/c.json", json.dumps({"name": "c"}))
changed = []
for path in list_files("cfg", "*.json"):
    data = json.loads(read_file(path))
    if "timeout" in data:
        data["timeout_s"] = data.pop("timeout")
        write_file(path, json.dumps(data, sort_keys=True))
        changed.append(path)
__result__ = {"changed": changed, "b": json.loads(read_file("cfg/b.json"))}
