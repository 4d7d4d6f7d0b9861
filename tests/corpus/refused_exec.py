# expect: error FORBIDDEN
exec("x = 1")
