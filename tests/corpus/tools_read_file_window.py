# expect: ok
head = read_file("app.log", max_lines=3)
tail = read_file("app.log", offset=10)
__result__ = {"head_lines": head.splitlines()[:3], "tail": tail.strip().splitlines()}
