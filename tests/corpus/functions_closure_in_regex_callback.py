# expect: ok
def expand(template, values):
    def replace(match):
        key = match.group(1)
        return str(values.get(key, "?"))
    return re.sub(r"\{(\w+)\}", replace, template)

__result__ = expand("Hello {name}, you have {count} new {thing}", {"name": "Ana", "count": 3})
