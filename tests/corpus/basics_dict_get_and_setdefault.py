# expect: ok
inventory = {"apples": 3}
inventory["pears"] = inventory.get("pears", 0) + 5
groups = {}
for word in ["apple", "avocado", "banana", "blueberry", "cherry"]:
    groups.setdefault(word[0], []).append(word)
__result__ = {"inventory": inventory, "groups": groups}
