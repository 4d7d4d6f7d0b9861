# expect: ok
values = [3, 1, 4, 1, 5, 9, 2, 6]
{"max": max(values), "min": min(values), "len": len(values)}
