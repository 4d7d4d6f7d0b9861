# expect: ok
log = "2024-05-01 ERROR disk full; 2024-05-02 WARN cpu hot; 2024-05-03 ERROR net down"
errors = [m.group(2) for m in re.finditer(r"(\d{4}-\d{2}-\d{2}) ERROR ([^;]+)", log)]
masked = re.sub(r"\d{4}-\d{2}-\d{2}", "<date>", log)
__result__ = {"errors": errors, "masked": masked}
