# expect: ok
tasks = [
    {"title": "write docs", "priority": 2, "due": "2024-06-03"},
    {"title": "fix bug", "priority": 1, "due": "2024-06-05"},
    {"title": "review", "priority": 2, "due": "2024-06-01"},
    {"title": "deploy", "priority": 1, "due": "2024-06-02"},
]
tasks.sort(key=lambda t: t["due"])
tasks.sort(key=lambda t: t["priority"])
__result__ = [t["title"] for t in tasks]
