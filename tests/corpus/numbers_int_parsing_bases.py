# expect: ok
__result__ = {"hex": int("ff", 16), "bin": int("1011", 2), "to_hex": hex(255), "to_bin": bin(10), "octal": oct(8), "from_float": int(7.9)}
