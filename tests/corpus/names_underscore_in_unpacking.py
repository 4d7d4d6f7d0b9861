# expect: ok
# needs: underscore
pairs = [("ana", 34, "Lisbon"), ("bo", 27, "Oslo")]
names = [name for name, _, _ in pairs]
first, _ = ("keep", "ignore")
__result__ = {"names": names, "first": first}
