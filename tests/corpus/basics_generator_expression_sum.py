# expect: ok
prices = {"apple": 1.2, "bread": 2.5, "milk": 0.99}
quantities = {"apple": 6, "bread": 1, "milk": 2}
total = sum(prices[item] * quantities[item] for item in prices)
__result__ = round(total, 2)
