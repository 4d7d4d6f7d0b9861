# expect: ok
skills = list_skills()
names = sorted(s["name"] for s in skills)
first = use_skill(names[0])
__result__ = {"names": names, "opened": first["name"], "has_content": len(first["content"]) > 100}
