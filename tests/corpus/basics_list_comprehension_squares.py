# expect: ok
squares = [n * n for n in range(1, 11)]
evens = [s for s in squares if s % 2 == 0]
__result__ = {"squares": squares, "even_squares": evens, "total": sum(squares)}
