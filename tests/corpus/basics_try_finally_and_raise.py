# expect: ok
log = []

def safe_divide(a, b):
    try:
        if b == 0:
            raise ZeroDivisionError("b is zero")
        return a / b
    except ZeroDivisionError as e:
        log.append(str(e))
        return None
    finally:
        log.append(f"divide {a} {b}")

__result__ = {"results": [safe_divide(6, 3), safe_divide(1, 0)], "log": log}
