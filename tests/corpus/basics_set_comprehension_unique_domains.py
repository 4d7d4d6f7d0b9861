# expect: ok
emails = ["ana@example.com", "bo@test.org", "chen@example.com", "dara@test.org", "eli@mail.net"]
domains = {e.split("@")[1] for e in emails}
__result__ = sorted(domains)
