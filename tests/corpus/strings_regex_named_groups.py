# expect: ok
line = "user=ana id=42 role=admin"
m = re.search(r"user=(?P<user>\w+) id=(?P<id>\d+)", line)
pairs = dict(re.findall(r"(\w+)=(\w+)", line))
__result__ = {"user": m.group("user"), "id": int(m.group("id")), "pairs": pairs, "named": m.groupdict()}
