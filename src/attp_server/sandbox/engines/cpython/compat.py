"""What the data stack needs changed to run in a worker that has no files and one thread.

Each fix replaces one function of a package (when the package has it: a version without it keeps its own, and
a program that reaches it gets the package's own error) and is applied by `preload` before the warm-up, so that
the warm-up itself never starts a thread or writes a file in the fork server:

- pyarrow: conversions to and from pandas, and Parquet and Feather reads, run in the calling thread. Arrow's
  thread pools cannot start threads in a worker (seccomp refuses ``clone``), and a pool started in the fork
  server would be a pool of threads its forks do not have: a read waiting on them would never end.
- pandas: Parquet files are opened with ``open()`` (the worker's file layer), not by Arrow itself.
- openpyxl: a worksheet is written into memory before it goes into the workbook's zip, not into a temporary file.

Runs in the fork server. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
from collections.abc import Callable
from typing import Any


def apply() -> list[str]:
    """Apply every fix whose package is loaded; return the names of those applied."""
    applied = []
    for name, fix in FIXES.items():
        with contextlib.suppress(Exception):
            if fix():
                applied.append(name)
    return applied


def _replace(module_name: str, attribute: str, make: Callable[[Any], Any]) -> bool:
    """Replace ``module.attribute`` by ``make(original)``, if the module is loaded and has it."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return False
    original = getattr(module, attribute, None)
    if original is None or getattr(original, "_attp_fixed", False):
        return False
    fixed = make(original)
    fixed._attp_fixed = True
    setattr(module, attribute, fixed)
    return True


def _one_thread_to_arrow(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def dataframe_to_arrays(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 3:
            args = (*args[:3], 1, *args[4:])
        else:
            kwargs["nthreads"] = 1
        return original(*args, **kwargs)

    return dataframe_to_arrays


def _one_thread_to_pandas(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def table_to_dataframe(options: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(options, dict):
            options = {**options, "use_threads": False}
        return original(options, *args, **kwargs)

    return table_to_dataframe


def _parquet_in_this_thread(original: Callable[..., Any]) -> Callable[..., Any]:
    """``pyarrow.parquet.read_table`` of one file read as a `ParquetFile` (the dataset reader it otherwise uses
    starts an I/O thread even with ``use_threads=False``)."""

    @functools.wraps(original)
    def read_table(source: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["use_threads"] = False
        plain = not args and not kwargs.get("filters") and not kwargs.get("filesystem") and not _is_path(source)
        if not plain:
            return original(source, *args, **kwargs)
        import pyarrow.parquet as pq

        file = pq.ParquetFile(source, memory_map=False, buffer_size=0, pre_buffer=False)
        return file.read(columns=kwargs.get("columns"), use_threads=False, use_pandas_metadata=True)

    return read_table


def _is_path(source: Any) -> bool:
    return isinstance(source, str | bytes) or hasattr(source, "__fspath__")


def _feather_in_this_thread(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def read_table(*args: Any, **kwargs: Any) -> Any:
        kwargs["use_threads"] = False
        return original(*args, **kwargs)

    return read_table


def _worksheets_in_memory(original: Callable[..., Any]) -> Callable[..., Any]:
    """openpyxl's ``ExcelWriter.write_worksheet``, the worksheet's XML made in memory."""

    @functools.wraps(original)
    def write_worksheet(self: Any, ws: Any) -> None:
        if self.workbook.write_only:
            original(self, ws)
            return
        from openpyxl.drawing.spreadsheet_drawing import SpreadsheetDrawing
        from openpyxl.worksheet._writer import WorksheetWriter

        ws._drawing = SpreadsheetDrawing()
        ws._drawing.charts = ws._charts
        ws._drawing.images = ws._images
        writer = WorksheetWriter(ws, out=io.BytesIO())
        writer.write()
        ws._rels = writer._rels
        self._archive.writestr(ws.path[1:], writer.read())
        self.manifest.append(ws)

    return write_worksheet


def _parquet_through_open(original: Callable[..., Any]) -> Callable[..., Any]:
    """pandas' ``_get_path_or_handle`` opening a local path with ``open()`` (the worker's file layer) instead of
    handing the path to Arrow, which would open it itself (and has no file system to open it in)."""

    @functools.wraps(original)
    def get_path_or_handle(
        path: Any, fs: Any, storage_options: Any = None, mode: str = "rb", is_dir: bool = False
    ) -> Any:
        from pandas.io.common import get_handle, is_fsspec_url, is_url, stringify_path

        local = stringify_path(path)
        if fs is None and not is_dir and isinstance(local, str) and not is_url(local) and not is_fsspec_url(local):
            handles = get_handle(local, mode, is_text=False, storage_options=storage_options)
            return handles.handle, handles, None
        return original(path, fs, storage_options=storage_options, mode=mode, is_dir=is_dir)

    return get_path_or_handle


FIXES: dict[str, Callable[[], bool]] = {
    "pandas.parquet": lambda: _replace("pandas.io.parquet", "_get_path_or_handle", _parquet_through_open),
    "pyarrow.from_pandas": lambda: _replace("pyarrow.pandas_compat", "dataframe_to_arrays", _one_thread_to_arrow),
    "pyarrow.to_pandas": lambda: _replace("pyarrow.pandas_compat", "table_to_dataframe", _one_thread_to_pandas),
    "pyarrow.parquet": lambda: _replace("pyarrow.parquet", "read_table", _parquet_in_this_thread),
    "pyarrow.feather": lambda: _replace("pyarrow.feather", "read_table", _feather_in_this_thread),
    "openpyxl.writer": lambda: _replace(
        "openpyxl.writer.excel",
        "ExcelWriter",
        lambda cls: _patched_class(cls, "write_worksheet", _worksheets_in_memory),
    ),
}
"""Each fix by name; applied in this order."""


def _patched_class(cls: Any, method: str, make: Callable[[Any], Any]) -> Any:
    """`cls` itself with `method` replaced (returned so that `_replace` puts it back where it was)."""
    setattr(cls, method, make(getattr(cls, method)))
    return cls
