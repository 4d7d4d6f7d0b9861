# expect: ok
# needs: imports
import uuid

__result__ = str(uuid.uuid5(uuid.NAMESPACE_DNS, "example.com"))
