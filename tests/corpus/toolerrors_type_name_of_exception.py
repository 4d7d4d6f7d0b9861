# expect: error FORBIDDEN
# message: e.code
# needs: dunder-advice
try:
    read_file("missing.txt")
except Exception as e:
    __result__ = type(e).__name__
