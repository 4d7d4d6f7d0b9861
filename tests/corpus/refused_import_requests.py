# expect: error IMPORT_FORBIDDEN
import requests

__result__ = requests.get("https://example.com").text
