# expect: ok
# needs: imports
import hashlib

text = "the quick brown fox"
__result__ = {
    "md5": hashlib.md5(text.encode()).hexdigest(),
    "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
    "sha1": hashlib.sha1(b"abc").hexdigest(),
}
