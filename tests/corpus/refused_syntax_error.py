# expect: error SYNTAX_ERROR
for i in range(3)
    print(i)
