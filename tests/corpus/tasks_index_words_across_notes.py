# expect: ok
# needs: imports
from collections import defaultdict

index = defaultdict(set)
for path in list_files("notes", "*.md"):
    for word in re.findall(r"[a-z]{5,}", read_file(path).lower()):
        index[word].add(path)
shared = {w: sorted(paths) for w, paths in index.items() if len(paths) > 1}
__result__ = dict(sorted(shared.items()))
