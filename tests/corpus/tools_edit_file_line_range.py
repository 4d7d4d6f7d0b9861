# expect: ok
write_file("draft.txt", "one\ntwo\nthree\nfour\n")
edit_file("draft.txt", start_line=2, end_line=3, new_content="TWO\nTHREE")
__result__ = read_file("draft.txt").splitlines()
