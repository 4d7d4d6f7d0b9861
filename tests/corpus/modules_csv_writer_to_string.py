# expect: ok
# needs: imports, modules, io
import csv
import io

buffer = io.StringIO()
writer = csv.writer(buffer)
writer.writerow(["name", "note"])
writer.writerow(["Ana", "a, b"])
__result__ = buffer.getvalue()
