# expect: ok
# needs: keyword-only
def describe(name, age=None, *, city="unknown", tags=()):
    parts = [name]
    if age is not None:
        parts.append(f"{age}y")
    parts.append(city)
    parts.extend(tags)
    return " / ".join(parts)

__result__ = [describe("Ana"), describe("Bo", 27, city="Oslo"), describe("Chen", tags=("admin", "ops"))]
