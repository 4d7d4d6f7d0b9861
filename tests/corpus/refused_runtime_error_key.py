# expect: error RUNTIME_ERROR
# message: KeyError
config = {"host": "localhost"}
__result__ = config["port"]
