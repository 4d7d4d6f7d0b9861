# expect: ok
rows = [("id", "name", "qty"), ("1", "widget", "12"), ("22", "gadget", "3")]
widths = [max(len(r[i]) for r in rows) for i in range(3)]
table = "\n".join(" | ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows)
print(table)
__result__ = {"widths": widths, "padded": "7".zfill(3), "centered": "hi".center(6, "*")}
