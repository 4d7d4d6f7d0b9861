# expect: ok
edit_file("config.toml", old_string="pool_size = 5", new_string="max_connections = 5")
text = read_file("config.toml")
__result__ = [line for line in text.splitlines() if "=" in line]
