# expect: ok
for i in range(5):
    write_file(f"batch/item_{i}.txt", f"item {i}\n" * (i + 1))
names = list_files("batch")
sizes = {n: len(read_file(n).splitlines()) for n in names}
__result__ = sizes
