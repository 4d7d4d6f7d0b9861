# expect: ok
# needs: imports
import difflib

old = ["a\n", "b\n", "c\n"]
new = ["a\n", "B\n", "c\n", "d\n"]
__result__ = "".join(difflib.unified_diff(old, new, fromfile="old.txt", tofile="new.txt"))
