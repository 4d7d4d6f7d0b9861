"""Built-in toolpacks, registered through the `attp.toolpacks` entry point like any third-party pack."""
