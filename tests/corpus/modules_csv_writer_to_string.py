# expect: ok
# needs: imports
import csv
import io

buffer = io.StringIO()
writer = csv.writer(buffer)
writer.writerow(["name", "note"])
writer.writerow(["Ana", "a, b"])
__result__ = buffer.getvalue()
