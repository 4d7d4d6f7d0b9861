"""The figures of a run: a printed table and ``bench/results.json``."""

from __future__ import annotations

import json
import operator
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_COMPARE = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


@dataclass
class Figure:
    """One number: a median (ms, MB, calls/s) or a same-run ratio of two medians (x)."""

    key: str
    value: float
    unit: str
    target: str | None = None
    """``"<= 3.0"``: an operator and a bound, checked (and printed) but never asserted."""

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        op, bound = self.target.split()
        return bool(_COMPARE[op](self.value, float(bound)))


@dataclass
class Report:
    quick: bool
    sections: dict[str, list[Figure]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    """What a section reports beyond its figures, by section (the gateway's: what each side read, the trial)."""

    def add(self, section: str, key: str, value: float, unit: str, target: str | None = None) -> None:
        self.sections.setdefault(section, []).append(Figure(key, value, unit, target))

    def figures(self) -> list[Figure]:
        return [figure for figures in self.sections.values() for figure in figures]

    def table(self) -> str:
        width = max([len(f.key) for f in self.figures()] + [10])
        lines: list[str] = []
        for section, figures in self.sections.items():
            lines.append(f"\n{section}")
            lines.append(f"  {'figure':<{width}}  {'median':>12}  {'unit':<7}  target")
            for f in figures:
                mark = "" if f.met is None else ("  ok" if f.met else "  MISSED")
                target = f"{f.target}{mark}" if f.target else ""
                lines.append(f"  {f.key:<{width}}  {f.value:>12,.3f}  {f.unit:<7}  {target}")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines).lstrip("\n")

    def data(self) -> dict[str, Any]:
        return {
            "quick": self.quick,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()},
            "rows": {f.key: f.value for f in self.figures()},
            "units": {f.key: f.unit for f in self.figures()},
            "targets": {f.key: f.target for f in self.figures() if f.target},
            "met": {f.key: f.met for f in self.figures() if f.target},
            "sections": {section: [f.key for f in figures] for section, figures in self.sections.items()},
            "notes": self.notes,
            "details": self.details,
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.data(), indent=2) + "\n")
