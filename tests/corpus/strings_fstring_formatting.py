# expect: ok
price = 1234.5678
ratio = 0.4567
name = "widget"
__result__ = [
    f"{name:>10}|",
    f"{price:,.2f}",
    f"{ratio:.1%}",
    f"{42:05d}",
    f"{name!r}",
    f"{price=:.1f}",
]
