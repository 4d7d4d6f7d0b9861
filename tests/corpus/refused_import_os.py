# expect: error IMPORT_FORBIDDEN
import os

__result__ = os.listdir(".")
