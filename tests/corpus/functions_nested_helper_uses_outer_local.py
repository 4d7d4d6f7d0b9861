# expect: ok
def report(rows):
    total = sum(r["amount"] for r in rows)

    def share(row):
        return round(row["amount"] / total * 100, 1)

    return [{"id": r["id"], "pct": share(r)} for r in rows]

__result__ = report([{"id": 1, "amount": 30}, {"id": 2, "amount": 70}])
