# expect: ok
# result: {"length": 36, "version": 4, "dashes": 4, "unique": true}
# needs: imports, underscore
import uuid

ids = [str(uuid.uuid4()) for _ in range(5)]
__result__ = {"length": len(ids[0]), "version": uuid.UUID(ids[0]).version, "dashes": ids[0].count("-"), "unique": len(set(ids)) == 5}
