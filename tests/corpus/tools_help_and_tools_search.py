# expect: ok
found = tools("file")
doc = help("read_file")
__result__ = {"names": sorted(t["name"] for t in found)[:4], "doc_mentions_args": "Args:" in doc}
