# expect: ok
# needs: imports
from datetime import datetime, timedelta

start = datetime(2024, 1, 1, 8, 0)
slots = [(start + timedelta(minutes=30 * i)).strftime("%H:%M") for i in range(4)]
__result__ = slots
