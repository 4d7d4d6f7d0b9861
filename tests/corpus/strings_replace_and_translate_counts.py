# expect: ok
s = "Hello, World! Hello, ATTP!"
__result__ = {
    "replaced": s.replace("Hello", "Bye", 1),
    "count": s.count("Hello"),
    "find": s.find("World"),
    "missing": s.find("xyz"),
    "swapcase": s.swapcase(),
    "isupper": "ATTP".isupper(),
}
