# expect: error MEMORY_LIMIT
blob = "x" * (10 ** 10)
