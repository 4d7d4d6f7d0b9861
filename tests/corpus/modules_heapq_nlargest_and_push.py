# expect: ok
# needs: imports, underscore
import heapq

scores = [88, 42, 97, 63, 75, 91]
heap = []
for s in scores:
    heapq.heappush(heap, s)
smallest = [heapq.heappop(heap) for _ in range(2)]
__result__ = {"top3": heapq.nlargest(3, scores), "smallest": smallest, "by_key": heapq.nsmallest(2, ["ccc", "a", "bb"], key=len)}
