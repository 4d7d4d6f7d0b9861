# expect: ok
text = "Contact ana@example.com or bo.smith@test.org; not-an-email@ or @nothing."
emails = re.findall(r"[\w.+-]+@[\w-]+\.[\w.]+", text)
__result__ = emails
