# expect: ok
lines = ["# heading", "key = value", "// comment", "name = ana", "plain"]
settings = {}
for line in lines:
    if line.startswith(("#", "//")):
        continue
    key, sep, value = line.partition("=")
    if sep:
        settings[key.strip()] = value.strip()
__result__ = settings
