# expect: error FORBIDDEN
# message: e.code
try:
    read_file("missing.txt")
except Exception as e:
    __result__ = type(e).__name__
