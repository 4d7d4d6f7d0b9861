# expect: ok
block = """
    first line
      indented
    last line
"""
lines = [l for l in block.splitlines() if l.strip()]
indent = min(len(l) - len(l.lstrip()) for l in lines)
__result__ = "\n".join(l[indent:] for l in lines)
