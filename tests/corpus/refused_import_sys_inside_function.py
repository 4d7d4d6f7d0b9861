# expect: error IMPORT_FORBIDDEN
def version():
    import sys
    return sys.version

__result__ = version()
