# expect: error FORBIDDEN
class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

__result__ = Point(1, 2).x
