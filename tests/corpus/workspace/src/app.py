from utils import slugify, parse_date


def main(titles):
    return [slugify(t) for t in titles]


def unused_report():
    return "never called"


def legacy_entry():
    return main(["a"])
