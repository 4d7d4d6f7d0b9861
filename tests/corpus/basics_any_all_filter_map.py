# expect: ok
nums = [4, 8, 15, 16, 23, 42]
__result__ = {
    "any_odd": any(n % 2 for n in nums),
    "all_positive": all(n > 0 for n in nums),
    "doubled": list(map(lambda n: n * 2, nums)),
    "big": list(filter(lambda n: n > 15, nums)),
}
