# expect: ok
# needs: imports, underscore
import random
import statistics

random.seed(42)
sample = [random.randint(1, 100) for _ in range(20)]
__result__ = {"mean": statistics.mean(sample), "first": sample[:3]}
