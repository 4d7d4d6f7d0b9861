# expect: ok
# needs: imports
import string

t = string.Template("Dear $name, your order $order is ready")
__result__ = {
    "letter": t.substitute(name="Ana", order="#42"),
    "digits": string.digits,
    "is_ident": all(c in string.ascii_letters + string.digits + "_" for c in "user_42"),
    "capwords": string.capwords("hello big world"),
}
