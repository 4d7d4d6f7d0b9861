# expect: error NAME_NOT_FOUND
__result__ = os.listdir(".")
