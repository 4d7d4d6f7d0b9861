def slugify(text):
    return text.lower().replace(" ", "-")


def parse_date(text):
    return text.split("-")


def old_helper(x):
    return x * 2
