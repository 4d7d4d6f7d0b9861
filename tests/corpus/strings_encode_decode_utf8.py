# expect: ok
text = "naïve café ✓"
data = text.encode("utf-8")
__result__ = {"bytes": len(data), "chars": len(text), "roundtrip": data.decode("utf-8") == text, "ascii": text.encode("ascii", "ignore").decode()}
