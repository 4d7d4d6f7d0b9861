# expect: ok
words = ["banana", "Apple", "cherry", "apple", "Banana"]
words.sort(key=str.lower)
__result__ = words
