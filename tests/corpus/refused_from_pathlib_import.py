# expect: error IMPORT_FORBIDDEN
from pathlib import Path

__result__ = Path("notes").read_text()
