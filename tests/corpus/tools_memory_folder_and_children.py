# expect: ok
folder = create_contents_page("Projects", "Ongoing projects", "usr-0")
for name in ["Atlas", "Beacon", "Comet"]:
    create_detail_page(name, f"Project {name}", f"Notes about {name}.", folder)
children = get_children(folder)
__result__ = {"names": [c["name"] for c in children], "parent_name": get_parent(children[0]["index"])["name"]}
