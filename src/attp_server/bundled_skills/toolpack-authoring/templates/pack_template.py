"""A complete toolpack for attp-server: query the CSV tables in a folder of the workspace.

Copy this file into your package (e.g. ``mypkg/tables.py``), rename the pack and the tools, and keep
the shape: an options model, a class whose methods are the tools, a ``build`` function that binds
them to the server's workspace, and a module-level ``toolpack``. Enable it with
``attp serve --toolpack mypkg.tables:toolpack`` or register it in your ``pyproject.toml``::

    [project.entry-points."attp.toolpacks"]
    tables = "mypkg.tables:toolpack"

Options come from ``ATTP_TABLES__MAX_ROWS=500`` or the config file's ``[toolpacks.tables]`` table.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from attp_server import ToolError, Toolpack, ToolpackContext
from attp_server.errors import suggest

_TABLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class TablesOptions(BaseModel):
    """Settings of the pack; unknown keys are refused so that a typo is a startup error."""

    model_config = ConfigDict(extra="forbid")

    folder: str = Field("tables", description="Folder of the CSV files, relative to the workspace.")
    max_rows: int = Field(1000, ge=1, le=100_000, description="Most rows one query returns.")


class Tables:
    """The tools, bound to one folder of CSV files. Tables are named by file stem: sales.csv is 'sales'."""

    def __init__(self, folder: Path, options: TablesOptions) -> None:
        self.folder = folder
        self.options = options

    def tools(self) -> list[Callable[..., Any]]:
        return [self.list_tables, self.describe_table, self.query_table]

    # -- the tools: their signatures and docstrings are exactly what the model reads ------------

    def list_tables(self) -> list[str]:
        """List the names of the CSV tables that can be queried.

        Returns:
            Sorted table names (file names without ".csv"), e.g. ["customers", "sales"].

        Example:
            names = list_tables()
        """
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.csv") if p.is_file())

    def describe_table(self, table: str) -> dict[str, Any]:
        """Describe a CSV table: its columns, its number of rows and its first rows.

        Args:
            table: The table name as list_tables() returns it, e.g. "sales".

        Returns:
            {"table": str, "columns": [column names], "rows": int, "sample": first 3 rows as dicts}.

        Raises:
            ToolError: TABLE_NOT_FOUND (suggested_value holds the closest table name).

        Example:
            info = describe_table("sales")
            columns = info["columns"]
        """
        columns, rows = self._read(table)
        return {"table": table, "columns": columns, "rows": len(rows), "sample": rows[:3]}

    def query_table(
        self,
        table: str,
        where: dict[str, str] | None = None,
        columns: list[str] | None = None,
        limit: int = 100,
    ) -> list[dict[str, str]]:
        """Return the rows of a CSV table whose columns equal the given values.

        Values are compared as text, exactly as written in the file.

        Args:
            table: The table name as list_tables() returns it, e.g. "sales".
            where: Column -> required value, e.g. {"region": "EU"}; None returns every row.
            columns: Only these columns in each row, e.g. ["date", "amount"]; None keeps all.
            limit: Most rows to return, at least 1; the server caps it (1000 by default).
                describe_table() tells how many rows the table has.

        Returns:
            The matching rows, in file order, as dicts of column -> text value.

        Raises:
            ToolError: TABLE_NOT_FOUND, UNKNOWN_COLUMN (suggested_value holds the closest column),
                LIMIT_OUT_OF_RANGE.

        Example:
            rows = query_table("sales", where={"region": "EU"}, columns=["date", "amount"])
            total = sum(float(r["amount"]) for r in rows)
        """
        if limit < 1:
            raise ToolError(
                "LIMIT_OUT_OF_RANGE",
                f"limit must be at least 1, not {limit}.",
                parameter_name="limit",
                received=str(limit),
                expected=f"an integer from 1 to {self.options.max_rows}",
                suggested_value="1",
            )
        known, rows = self._read(table)
        for parameter, names in (("where", list(where or {})), ("columns", columns or [])):
            for name in names:
                if name not in known:
                    raise _unknown_column(table, name, known, parameter)
        matching = [row for row in rows if all(row.get(k) == v for k, v in (where or {}).items())]
        kept = columns or known
        # The server's cap wins over the model's limit, so the default limit works whatever max_rows is.
        return [{name: row.get(name, "") for name in kept} for row in matching[: min(limit, self.options.max_rows)]]

    # -- helpers: not tools (they are not in the list that tools() returns) ---------------------

    def _read(self, table: str) -> tuple[list[str], list[dict[str, str]]]:
        """Columns and rows of a table. Taking a name, not a path, keeps the model inside the folder."""
        if not _TABLE_NAME.match(table):
            raise ToolError(
                "TABLE_NOT_FOUND",
                f"{table!r} is not a table name; names are letters, digits, '-' and '_', without '.csv'.",
                parameter_name="table",
                received=table,
                expected="a name from list_tables()",
                suggested_value=suggest(table.removesuffix(".csv").rsplit("/", 1)[-1], self.list_tables()),
            )
        path = self.folder / f"{table}.csv"
        if not path.is_file():
            closest = suggest(table, self.list_tables())
            raise ToolError(
                "TABLE_NOT_FOUND",
                f"There is no table {table!r}." + (f" Did you mean {closest!r}?" if closest else ""),
                parameter_name="table",
                received=table,
                suggested_value=closest,
                solution="Call list_tables() to see the tables.",
            )
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = [{k: v for k, v in row.items() if k is not None} for row in reader]
            return list(reader.fieldnames or []), rows


def _unknown_column(table: str, name: str, known: list[str], parameter: str) -> ToolError:
    closest = suggest(name, known)
    return ToolError(
        "UNKNOWN_COLUMN",
        f"Table {table!r} has no column {name!r}." + (f" Did you mean {closest!r}?" if closest else ""),
        parameter_name=parameter,
        received=name,
        expected="one of: " + ", ".join(known),
        suggested_value=closest,
    )


def build(ctx: ToolpackContext) -> list[Callable[..., Any]]:
    """Called once at startup with the server's workspace and this pack's validated options."""
    options = ctx.options if isinstance(ctx.options, TablesOptions) else TablesOptions()
    return Tables(ctx.workspace / options.folder, options).tools()


toolpack = Toolpack(
    name="tables",
    description="Query the CSV tables in the workspace's tables/ folder.",
    build=build,
    options=TablesOptions,
    read_only=True,
)
