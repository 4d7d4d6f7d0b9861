# expect: ok
text = read_file("notes/meeting.md")
title = text.splitlines()[0].lstrip("# ").strip()
date = re.search(r"\d{4}-\d{2}-\d{2}", title).group(0)
items = [line[2:] for line in text.splitlines() if line.startswith("- ")]
todo = [i.replace("TODO: ", "") for i in items if i.startswith("TODO")]
__result__ = {"date": date, "items": len(items), "todo": todo, "weekday": datetime.date.fromisoformat(date).strftime("%A")}
