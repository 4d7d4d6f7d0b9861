# expect: ok
# needs: imports
from typing import Iterable, Tuple

def minmax(values: Iterable[float]) -> Tuple[float, float]:
    values = list(values)
    return min(values), max(values)

__result__ = minmax([3.5, -1.0, 8.25])
