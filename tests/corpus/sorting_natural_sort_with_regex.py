# expect: ok
files = ["file10.txt", "file2.txt", "file1.txt", "file20.txt", "file3.txt"]

def natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]

__result__ = sorted(files, key=natural_key)
