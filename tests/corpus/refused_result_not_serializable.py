# expect: error RESULT_NOT_SERIALIZABLE
__result__ = re.compile(r"\d+")
