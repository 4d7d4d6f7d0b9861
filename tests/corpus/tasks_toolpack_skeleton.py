# expect: ok
# needs: imports
import textwrap

name = "weather"
module = textwrap.dedent(f'''
    from attp_server import Toolpack


    def forecast(city: str, days: int = 3) -> list[dict]:
        """Return a {{days}}-day forecast for a city.

        Args:
            city: The city name.
            days: How many days.
        """
        return []


    toolpack = Toolpack(name="{name}", description="Weather forecasts.", tools=[forecast])
''').lstrip()
write_file(f"{name}_pack/__init__.py", module)
write_file(f"{name}_pack/README.md", f"# {name}\n\nEnable with --toolpack {name}_pack:toolpack\n")
__result__ = sorted(list_files(f"{name}_pack"))
