# expect: ok
# needs: imports
import difflib

commands = ["status", "commit", "checkout", "branch", "merge"]
__result__ = {
    "guess": difflib.get_close_matches("comit", commands, n=1),
    "ratio": round(difflib.SequenceMatcher(None, "kitten", "sitting").ratio(), 3),
}
