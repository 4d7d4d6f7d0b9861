# expect: error IMPORT_FORBIDDEN
import subprocess

__result__ = subprocess.run(["ls"], capture_output=True).stdout
