"""What a data-stack worker loads before its walls close: once, in the fork server every such worker is forked from.

After the lockdown a worker cannot read a file, so nothing can be imported or loaded lazily from disk any more:
`preload` imports it all first. The standard library modules that work without files or network (`STDLIB`), the
operator's packages (``cpython_packages``) with every submodule that imports cleanly, the packages pandas reads
and writes files with (openpyxl, pyarrow), and then a warm-up that runs what those packages otherwise load on
first use: matplotlib's fonts (kept in memory, `files.PRELOADED`), the time zones, Pillow's image plugins,
OpenSSL's digests. Numerical libraries run one thread (`lockdown.ONE_THREAD`, in the environment the pool gives
every worker): a worker locks down only with one thread, and forks of a threaded fork server would inherit
half-held locks.

A module the program imports that was not loaded here is refused by `imports.Preloaded`, which names the setting.
Runs in the fork server (and in a worker started as a new interpreter). Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import pkgutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

from attp_server.sandbox.engines.cpython import compat, files, loop
from attp_server.sandbox.process.lockdown import ONE_THREAD

STDLIB = (
    "abc", "argparse", "array", "ast", "asyncio", "base64", "binascii", "bisect", "bz2", "calendar", "cmath",
    "codecs", "collections", "collections.abc", "colorsys", "concurrent.futures", "contextlib", "contextvars", "copy",
    "copyreg", "csv", "dataclasses", "datetime", "decimal", "difflib", "dis", "email", "email.message",
    "email.parser", "email.policy", "email.utils", "enum", "errno", "fnmatch", "fractions", "functools", "gc",
    "getopt", "glob", "graphlib", "gzip", "hashlib", "heapq", "hmac", "html", "html.entities", "html.parser", "http",
    "inspect", "io", "ipaddress", "itertools", "json", "keyword", "linecache", "locale", "logging", "lzma", "math",
    "mimetypes", "numbers", "operator", "os", "pathlib", "pickle", "pprint", "queue", "quopri", "random", "re",
    "reprlib", "sched", "secrets", "shlex", "sqlite3", "statistics", "string", "stringprep", "struct", "sys",
    "tarfile", "textwrap", "threading", "time", "timeit", "tokenize", "tomllib", "traceback", "types", "typing",
    "unicodedata", "urllib.parse", "uuid", "warnings", "weakref", "xml.dom.minidom", "xml.etree.ElementTree",
    "zipfile", "zlib", "zoneinfo",
)  # fmt: skip
"""The standard library a program may import: what computes, parses and formats without a file, socket or process
of its own (``socket``, ``subprocess``, ``multiprocessing``, ``ssl`` are left out: they could only fail)."""


COMPANIONS = {
    "pandas": ("dateutil", "dateutil.parser", "dateutil.relativedelta", "dateutil.tz", "openpyxl", "pyarrow",
               "pyarrow.compute", "pyarrow.csv", "pyarrow.json", "pyarrow.parquet", "pyarrow.pandas_compat"),
    "matplotlib": ("PIL", "PIL.Image", "PIL.PngImagePlugin", "PIL.JpegImagePlugin", "mpl_toolkits.mplot3d"),
}  # fmt: skip
"""Modules a package loads only when a program first reads or writes a file, draws in 3D or saves an image."""

WALKED = ("openpyxl",)
"""Companions whose every submodule is imported too, like every package of ``cpython_packages`` (those that import
cleanly): packages import many submodules lazily, on first use, which a locked-down worker no longer can."""

SKIPPED_PARTS = frozenset({
    "tests", "testing", "conftest", "_pyinstaller", "f2py", "distutils", "_build_utils", "benchmarks", "sphinxext",
    "backends", "_numba", "mypy_plugin",
})  # fmt: skip
"""Submodules never walked into: test suites, build tools, a type checker's plugin (numpy's imports mypy where it is
installed: 145 modules, 8 MB more in every fork), GUI backends (only Agg draws here)."""

BACKENDS = ("matplotlib.backends.backend_agg", "matplotlib.backends.backend_svg", "matplotlib.backends.backend_pdf")


class Loaded:
    """What `preload` loaded: the packages (name -> version), what failed, and how long it took."""

    packages: ClassVar[dict[str, str]] = {}
    missing: ClassVar[dict[str, str]] = {}
    """Package -> why it is not here (not installed, or its import failed)."""
    seconds = 0.0
    done = False


def preload(packages: Iterable[str]) -> None:
    """Load everything a program on the ``cpython`` engine may use (`packages`: the ``cpython_packages`` setting)."""
    started = time.perf_counter()
    os.environ.update(ONE_THREAD)  # (a new interpreter has them already: the pool sets them)
    for name in STDLIB:
        _quietly(importlib.import_module, name)
    for package in dict.fromkeys(packages):
        _load_package(package)
    compat.apply()
    _warm_up()
    loop.install()
    os.register_at_fork(after_in_child=_reseed)
    Loaded.seconds = time.perf_counter() - started
    Loaded.done = True


def _reseed() -> None:
    """In each fork: numpy's global generator (``np.random.rand``, ``choice``, pandas' ``sample``) seeded afresh
    from the operating system, as ``random`` reseeds itself; otherwise every run would draw the fork server's
    numbers, the same in each."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _load_package(package: str) -> None:
    try:
        importlib.import_module(package)
    except Exception as exc:  # not installed, or broken: said in the tool description and the ImportError
        Loaded.missing[package] = "not installed" if isinstance(exc, ModuleNotFoundError) else f"{exc!r}"[:200]
        return
    Loaded.packages[package] = _version(package)
    for companion in COMPANIONS.get(package, ()):
        _quietly(importlib.import_module, companion)
    if package == "matplotlib":
        for backend in BACKENDS:
            _quietly(importlib.import_module, backend)
        _quietly(importlib.import_module, "matplotlib.pyplot")
    for walked in (package, *(name for name in WALKED if name in COMPANIONS.get(package, ()))):
        _walk(walked)


def _walk(package: str) -> None:
    """Import every submodule of `package` that imports cleanly (an optional dependency missing is fine)."""
    module = sys.modules.get(package)
    path = getattr(module, "__path__", None)
    if path is None:
        return
    for info in pkgutil.walk_packages(path, f"{package}.", onerror=lambda name: None):
        parts = info.name.split(".")
        if any(part in SKIPPED_PARTS or part.startswith("test") for part in parts):
            continue
        _quietly(importlib.import_module, info.name)


def _version(package: str) -> str:
    version = getattr(sys.modules.get(package), "__version__", None)
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _quietly(function: Callable[..., object], *args: object) -> None:
    with contextlib.suppress(Exception):
        function(*args)


def _warm_up() -> None:
    """Run, once, what the packages load lazily from disk on first use (each step on its own: one failing, for a
    package that is not installed, leaves the others warm)."""
    steps = (
        (None, _warm_stdlib), (None, _warm_time_zones), ("numpy", _warm_numpy), ("pandas", _warm_pandas),
        ("matplotlib", _keep_fonts), ("matplotlib", _warm_matplotlib),
    )  # fmt: skip
    for package, step in steps:
        if package is not None and package not in Loaded.packages:
            continue
        try:
            step()
        except Exception as exc:  # said on stderr (the server logs it): a program meets what was not warmed
            print(f"attp: the cpython warm-up {step.__name__} failed: {exc!r}"[:500], file=sys.stderr)


def _warm_stdlib() -> None:
    import hashlib
    import locale
    import mimetypes
    import sqlite3

    mimetypes.init()
    locale.getpreferredencoding(False)
    for algorithm in sorted(hashlib.algorithms_available):
        with contextlib.suppress(Exception):
            digest = hashlib.new(algorithm, b"preload")
            digest.hexdigest(16) if algorithm.startswith("shake") else digest.hexdigest()  # type: ignore[call-arg]
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.execute("create table t (a integer, b text)")
        db.executemany("insert into t values (?, ?)", [(1, "x"), (2, "y")])
        db.execute("select b, sum(a) from t group by b order by 2").fetchall()


ZONES: dict[str, object] = {}
"""Every time zone, loaded: `zoneinfo.ZoneInfo` finds a zone it has loaded without reading a file."""


def _warm_time_zones() -> None:
    import zoneinfo

    for key in sorted(zoneinfo.available_timezones()):
        with contextlib.suppress(Exception):
            ZONES[key] = zoneinfo.ZoneInfo(key)
    with contextlib.suppress(Exception):
        import dateutil.tz

        for key in ("UTC", "Europe/London", "Europe/Paris", "America/New_York", "Asia/Tokyo"):
            ZONES[f"dateutil:{key}"] = dateutil.tz.gettz(key)


def _warm_numpy() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    matrix = rng.random((64, 64))
    (matrix @ matrix).sum()
    np.linalg.inv(matrix + np.eye(64))
    np.linalg.svd(matrix)
    np.fft.fft(matrix[0])
    np.percentile(matrix, [5, 50, 95])
    np.histogram(matrix, bins=10)
    np.polyfit(np.arange(10), np.arange(10) ** 2, 2)
    np.datetime64("2024-01-02") + np.timedelta64(1, "D")
    repr(matrix)
    np.unique(rng.integers(0, 5, 100), return_counts=True)


def _warm_pandas() -> None:
    import io

    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(
        {
            "region": ["north", "south", "east", "west"] * 25,
            "amount": np.arange(100, dtype=float),
            "units": np.arange(100) % 7,
            "day": pd.date_range("2024-01-01", periods=100, freq="D"),
        }
    )
    frame.groupby("region").agg(total=("amount", "sum"), mean=("amount", "mean"), n=("units", "count"))
    frame.pivot_table(index="region", columns="units", values="amount", aggfunc="sum", fill_value=0)
    frame.set_index("day").resample("W")["amount"].sum()
    frame["amount"].rolling(7).mean()
    frame["amount"].quantile([0.5, 0.9])
    frame.describe(include="all")
    frame.merge(frame.groupby("region", as_index=False)["amount"].sum(), on="region", suffixes=("", "_total"))
    frame.assign(day_text=frame["day"].dt.strftime("%Y-%m-%d"), month=frame["day"].dt.to_period("M"))
    frame["region"].str.upper().value_counts()
    pd.to_datetime(["2024-03-01 10:00", "2024-03-02"], format="mixed")
    pd.Timestamp("2024-01-01", tz="Europe/Paris").tz_convert("America/New_York")
    pd.cut(frame["amount"], bins=4)
    repr(frame)
    frame.to_string()
    frame.to_html()
    frame.to_dict("records")
    frame.to_json(orient="records", date_format="iso")
    pd.read_json(io.StringIO('[{"a": 1, "b": "x"}]'))
    pd.json_normalize([{"a": {"b": 1}, "c": [1, 2]}])
    text = frame.to_csv(index=False)
    pd.read_csv(io.StringIO(text), parse_dates=["day"])
    pd.read_csv(io.StringIO('{"a": 1}\n{"a": 2}\n'), sep="\t")
    pd.read_json(io.StringIO('{"a": 1}\n{"a": 2}\n'), lines=True)
    for write, read in (("to_parquet", "read_parquet"), ("to_excel", "read_excel")):  # (feather compresses in threads)
        with contextlib.suppress(Exception):
            buffer = io.BytesIO()
            getattr(frame, write)(buffer)
            buffer.seek(0)
            getattr(pd, read)(buffer)


def _keep_fonts() -> None:
    """matplotlib's own fonts, and those its default families resolve to wherever they are, kept in memory (a
    worker opens fonts afresh: FreeType faces do not survive a fork)."""
    import matplotlib
    from matplotlib import font_manager

    files.preload_tree(Path(matplotlib.get_data_path()) / "fonts")
    for family in ("sans-serif", "serif", "monospace"):
        for properties in (
            font_manager.FontProperties(family=[family]),
            font_manager.FontProperties(family=[family], weight="bold"),
            font_manager.FontProperties(family=[family], style="italic"),
        ):
            found = font_manager.findfont(properties)
            if os.path.realpath(found) not in files.PRELOADED:
                _quietly(files.preload_file, found)


def _warm_matplotlib() -> None:
    import io

    import matplotlib.pyplot as plt
    import numpy as np

    figure, axes = plt.subplots(2, 2, figsize=(6, 4))
    days = np.arange("2024-01-01", "2024-03-01", dtype="datetime64[D]")
    axes[0, 0].plot(days, np.arange(len(days)), label="line")
    axes[0, 0].legend()
    axes[0, 1].bar(["a", "b"], [1, 2])
    axes[1, 0].hist(np.arange(100) % 7, bins=5)
    axes[1, 1].scatter([1, 2], [3, 4], c=[1, 2])
    axes[1, 1].annotate("note", (1, 3))
    figure.suptitle(r"Preload $\alpha^2$", fontweight="bold")
    axes[0, 1].set_title("italic", style="italic")
    axes[1, 0].set_xlabel("mono", family="monospace")
    figure.tight_layout()
    for fmt in ("png", "svg", "pdf", "jpg"):
        with contextlib.suppress(Exception):
            figure.savefig(io.BytesIO(), format=fmt)
    plt.close("all")
    with contextlib.suppress(Exception):
        import pandas as pd

        frame = pd.DataFrame({"x": pd.date_range("2024-01-01", periods=5), "y": range(5)})
        axis = frame.plot(x="x", y="y", kind="line")
        frame.plot(kind="bar", x="x", y="y")
        frame["y"].plot(kind="hist")
        axis.figure.savefig(io.BytesIO(), format="png")
        plt.close("all")
