# expect: ok
# needs: imports
import csv

text = 'name,city,note\nAna,Lisbon,"likes, commas"\nBo,Oslo,"says ""hi"""\n'
rows = list(csv.reader(text.splitlines()))
__result__ = rows
