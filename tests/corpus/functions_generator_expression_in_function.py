# expect: ok
def word_stats(text):
    words = text.split()
    return {"count": len(words), "longest": max(words, key=len), "avg": round(sum(len(w) for w in words) / len(words), 2)}

__result__ = word_stats("models write short programs that call tools")
