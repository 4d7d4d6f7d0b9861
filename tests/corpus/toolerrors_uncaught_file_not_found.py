# expect: error FILE_NOT_FOUND
# message: does not exist
rows = read_file("data/sales.csv").splitlines()
__result__ = len(rows)
