# expect: ok
record = {"city": "Zürich", "note": "naïve"}
__result__ = [
    json.dumps(record, ensure_ascii=True),
    json.dumps(record, ensure_ascii=False),
    json.dumps([1, 2], separators=(",", ":")),
    json.loads(json.dumps(record, ensure_ascii=True)) == record,
]
