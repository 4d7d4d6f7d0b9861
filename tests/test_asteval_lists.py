"""asteval's part in the sandbox: its published lists of unsafe attribute names check the allowlist.

The evaluator is the project's own (`attp_server.sandbox.engines.python`); what asteval still does is give a
second, independently kept opinion on which attribute names must never be reachable. These tests hold
that to account: the lists are read from the installed asteval, every name on them is refused on real
values through the real path, and the allowlist cannot be widened to one of them.
"""

from __future__ import annotations

import datetime
import re

import pytest
from asteval.astutils import UNSAFE_ATTRS, UNSAFE_ATTRS_DTYPES

from attp_server.sandbox import policy
from attp_server.sandbox.engines.python import evaluator
from attp_server.sandbox.limits import Forbidden
from attp_server.sandbox.policy import ATTRIBUTES, CLASS_ATTRIBUTES, allow_attributes, get_attribute, unsafe_by_asteval
from attp_server.sandbox.process.tools import ToolError
from tests.support.evaluate import sandboxed

SAMPLES: list[object] = [
    "text",
    b"bytes",
    3,
    2.5,
    [1],
    (1,),
    {"a": 1},
    {1},
    range(3),
    datetime.date(2024, 1, 1),
    re.compile("x"),
    str,
    int,
    ToolError({"code": "X"}),
]


def test_the_evaluator_is_not_an_asteval_interpreter() -> None:
    """Nothing of asteval's tree walk is inherited: only the lists below are asteval's."""
    from asteval import Interpreter

    assert not issubclass(evaluator.Evaluator, Interpreter)


def test_asteval_publishes_the_lists_the_policy_reads() -> None:
    assert {"mro", "gi_frame", "f_locals", "func_globals", "__globals__", "__subclasses__"} <= set(UNSAFE_ATTRS)
    assert {"format", "format_map"} <= set(UNSAFE_ATTRS_DTYPES[str])


@pytest.mark.parametrize("name", sorted(UNSAFE_ATTRS))
def test_every_name_asteval_calls_unsafe_is_refused_on_every_plain_value(name: str) -> None:
    for value in SAMPLES:
        with pytest.raises((Forbidden, AttributeError)):
            get_attribute(value, name)


def test_no_allowlist_table_holds_a_name_asteval_calls_unsafe_unless_a_checked_stand_in_replaces_it() -> None:
    for cls, names in ATTRIBUTES.items():
        assert unsafe_by_asteval(cls, names, wrapped=policy._WRAPPERS.get(cls, {})) == [], cls
    for cls, names in CLASS_ATTRIBUTES.items():
        assert unsafe_by_asteval(cls, names) == [], cls
    # str.format and format_map are on asteval's list for str: reachable only through their stand-ins.
    assert unsafe_by_asteval(str, ATTRIBUTES[str]) == ["format", "format_map"]
    assert {"format", "format_map"} <= set(policy._WRAPPERS[str])
    assert "format" not in CLASS_ATTRIBUTES[str]


@pytest.mark.parametrize("name", ["mro", "gi_frame", "f_locals"])
def test_the_allowlist_cannot_be_widened_to_a_name_asteval_calls_unsafe(name: str) -> None:
    class Handed:
        """A type a curated module might hand out."""

    with pytest.raises(ValueError, match=f"asteval lists \\['{name}'\\] as unsafe on Handed"):
        allow_attributes(Handed, ["value", name])
    with pytest.raises(ValueError, match="asteval lists"):
        allow_attributes(Handed, ["value"], on_class=[name])
    assert Handed not in ATTRIBUTES


def test_an_unsafe_name_written_by_a_program_is_refused_in_the_evaluator() -> None:
    generator = sandboxed("g = (x for x in [1])\n__result__ = g.gi_frame")
    method = sandboxed("__result__ = str.mro()")
    assert generator.error == "Forbidden", generator
    assert method.error in {"Forbidden", "AttributeError"}, method
