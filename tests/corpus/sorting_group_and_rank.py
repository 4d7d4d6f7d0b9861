# expect: ok
# needs: underscore
results = [("ana", "math", 90), ("bo", "math", 75), ("ana", "art", 60), ("bo", "art", 95), ("chen", "math", 82)]
by_subject = {}
for student, subject, score in results:
    by_subject.setdefault(subject, []).append((score, student))
ranking = {subject: [s for _, s in sorted(entries, reverse=True)] for subject, entries in by_subject.items()}
__result__ = ranking
