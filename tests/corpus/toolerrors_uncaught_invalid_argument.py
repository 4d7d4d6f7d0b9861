# expect: error INVALID_ARGUMENT
write_file("x.txt")
