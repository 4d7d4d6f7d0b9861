# expect: ok
errors = [l for l in read_file("app.log").splitlines() if " ERROR " in l]
for e in errors:
    print(e.split(" ", 2)[2])
__result__ = len(errors)
