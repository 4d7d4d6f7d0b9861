# expect: ok
# needs: imports
from typing import List, Dict, Optional

def top_scores(scores: Dict[str, int], n: int = 2) -> List[str]:
    return sorted(scores, key=scores.get, reverse=True)[:n]

def find(name: str, people: List[Dict[str, str]]) -> Optional[Dict[str, str]]:
    return next((p for p in people if p["name"] == name), None)

__result__ = {"top": top_scores({"a": 3, "b": 9, "c": 5}), "found": find("Bo", [{"name": "Bo"}])}
