# expect: ok
# needs: imports, modules
import csv

text = 'name,city,note\nAna,Lisbon,"likes, commas"\nBo,Oslo,"says ""hi"""\n'
rows = list(csv.reader(text.splitlines()))
__result__ = rows
