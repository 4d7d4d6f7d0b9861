# expect: ok
doc = '{"users": [{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": []}, {"id": 3, "tags": ["b"]}]}'
data = json.loads(doc)
__result__ = {
    "ids_with_b": [u["id"] for u in data["users"] if "b" in u["tags"]],
    "tag_count": sum(len(u["tags"]) for u in data["users"]),
}
