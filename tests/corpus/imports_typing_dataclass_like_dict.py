# expect: ok
# needs: imports
from typing import Any

def make_record(**fields: Any) -> dict:
    return {"id": fields.pop("id", 0), "data": fields}

__result__ = make_record(id=7, name="x", size=3)
