# expect: ok
titles = ["hello world", "  Python  tips & tricks ", "ATTP protocol v2"]

def slugify(s):
    s = re.sub(r"[^a-z0-9]+", "-", s.strip().lower())
    return s.strip("-")

__result__ = [{"title": t.strip().title(), "slug": slugify(t)} for t in titles]
