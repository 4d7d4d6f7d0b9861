# expect: ok
# needs: imports
import base64

token = base64.b64encode("user:secret ✓".encode("utf-8")).decode("ascii")
back = base64.b64decode(token).decode("utf-8")
__result__ = {"token": token, "back": back, "urlsafe": base64.urlsafe_b64encode(b"\xfb\xff").decode()}
