# expect: ok
amounts = [0.1] * 10
__result__ = {"naive": sum(amounts), "fsum": math.fsum(amounts), "rounded": round(sum(amounts), 10), "sci": f"{123456789.0:.3e}"}
