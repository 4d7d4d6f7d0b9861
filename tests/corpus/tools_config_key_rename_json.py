# expect: ok
settings = json.loads(read_file("settings.json"))
settings["db"]["max_connections"] = settings["db"].pop("pool_size")
write_file("settings.json", json.dumps(settings, indent=2) + "\n")
check = json.loads(read_file("settings.json"))
__result__ = {"db": check["db"], "has_old_key": "pool_size" in check["db"]}
