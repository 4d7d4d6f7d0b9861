# expect: ok
# needs: imports
import hashlib

write_file("dupes/a.txt", "same text\n")
write_file("dupes/b.txt", "same text\n")
write_file("dupes/c.txt", "other text\n")
by_hash = {}
for path in list_files("dupes"):
    digest = hashlib.sha256(read_file(path).encode("utf-8")).hexdigest()
    by_hash.setdefault(digest, []).append(path)
__result__ = [paths for paths in by_hash.values() if len(paths) > 1]
