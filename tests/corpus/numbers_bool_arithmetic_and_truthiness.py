# expect: ok
flags = [True, False, True, True]
values = [0, "", [], {}, None, "0", [0]]
__result__ = {"count_true": sum(flags), "truthy": [bool(v) for v in values]}
