# expect: ok
# needs: imports
import csv
import io

text = "product,units,price\nwidget,3,2.50\ngadget,1,10.00\nwidget,2,2.50\n"
totals = {}
for row in csv.DictReader(io.StringIO(text)):
    totals[row["product"]] = totals.get(row["product"], 0) + int(row["units"]) * float(row["price"])
__result__ = totals
