# expect: ok
tree = {"name": "root", "children": [{"name": "a", "children": [{"name": "a1", "children": []}]}, {"name": "b", "children": []}]}

def depth(node):
    return 1 + max((depth(c) for c in node["children"]), default=0)

def names(node, prefix=""):
    path = prefix + "/" + node["name"]
    result = [path]
    for child in node["children"]:
        result += names(child, path)
    return result

__result__ = {"depth": depth(tree), "paths": names(tree)}
