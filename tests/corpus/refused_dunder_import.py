# expect: error FORBIDDEN
os = __import__("os")
