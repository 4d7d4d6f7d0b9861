# expect: ok
payload = {"name": "report", "values": [1, 2.5, None, True], "nested": {"a": [], "b": {}}}
text = json.dumps(payload, sort_keys=True)
pretty = json.dumps(payload, indent=2)
__result__ = {"text": text, "lines": len(pretty.splitlines()), "back": json.loads(text) == payload}
