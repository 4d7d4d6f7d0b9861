# expect: ok
# needs: imports
from itertools import chain, islice, accumulate, count

merged = list(chain([1, 2], [3], [4, 5]))
firsts = list(islice(count(10, 5), 4))
running = list(accumulate([1, 2, 3, 4]))
__result__ = {"merged": merged, "firsts": firsts, "running": running}
