"""The curated `decimal` and `fractions` a program sees: exact arithmetic (money) with bounded cost.

Both build numbers whose cost grows with their size, so both are bounded:

* ``decimal``: ``Decimal`` builds CPython's own ``decimal.Decimal`` (the values are the real type, so
  ``isinstance(x, decimal.Decimal)`` holds for every one, results of arithmetic included), refusing a
  value of more than `MAX_DECIMAL_DIGITS` digits or an exponent beyond `MAX_DECIMAL_EXPONENT`
  (``Decimal("1e999999")`` is cheap to write, but ``int()`` of it takes half a minute and ``f"{d:f}"`` is a
  million characters). Arithmetic runs in `CONTEXT`: 28 significant digits, half-even rounding, exponents
  within the same bound, and `InvalidOperation`, `DivisionByZero` and `Overflow` raised (and catchable by
  their names). A program cannot reach or change the context (``getcontext``, ``localcontext`` and
  ``Context`` are left out): `use_context` installs a fresh copy for every run. ``quantize`` with the
  ``ROUND_*`` constants rounds money as it should be rounded.
* ``fractions``: ``Fraction`` is a subclass whose construction and every operator refuse a numerator or
  denominator over `MAX_FRACTION_BITS` bits: the library's arithmetic runs in Python on integers the
  sandbox's own size checks never see, and a few squarings (or ``Fraction("1e99999999")``, which the
  library turns into ``10**99999999``) would take minutes.

Imported by the worker; imports nothing from the rest of ``server`` but ``attp_server.sandbox``.
"""

from __future__ import annotations

import decimal as _decimal
import fractions as _fractions
import re as _re
from collections.abc import Callable
from typing import Any

from attp_server.sandbox.limits import SizeLimitError
from attp_server.sandbox.policy import allow_attributes
from attp_server.sandbox.stdlib.namespaces import Namespace

MAX_DECIMAL_DIGITS = 10_000
"""Most digits of a Decimal a program builds (its coefficient)."""
MAX_DECIMAL_EXPONENT = 10_000
"""Largest exponent (either sign) of a Decimal: ``int()`` of one costs milliseconds, ``f"{d:f}"`` is 10,000
characters."""
MAX_FRACTION_BITS = 32_768
"""Largest numerator or denominator of a Fraction (about 9,900 digits): each operation stays in milliseconds."""

CONTEXT = _decimal.Context(
    prec=28,
    rounding=_decimal.ROUND_HALF_EVEN,
    Emax=MAX_DECIMAL_EXPONENT,
    Emin=-MAX_DECIMAL_EXPONENT,
    traps=[_decimal.InvalidOperation, _decimal.DivisionByZero, _decimal.Overflow],
)
"""Where a run's Decimal arithmetic happens (CPython's default context, with bounded exponents)."""


def use_context() -> None:
    """Make a fresh copy of `CONTEXT` the current thread's decimal context (the worker does, before each run)."""
    _decimal.setcontext(CONTEXT.copy())


# ---------------------------------------------------------------- decimal


def check_decimal(value: _decimal.Decimal) -> _decimal.Decimal:
    """`value`, or `SizeLimitError` when its digits or its exponent are past the bounds."""
    if value.is_finite():
        digits, exponent = len(value.as_tuple().digits), int(value.as_tuple().exponent)
        if digits > MAX_DECIMAL_DIGITS:
            raise SizeLimitError(f"a Decimal of {digits:,} digits exceeds {MAX_DECIMAL_DIGITS:,}")
        if abs(exponent) > MAX_DECIMAL_EXPONENT or abs(value.adjusted()) > MAX_DECIMAL_EXPONENT:
            raise SizeLimitError(
                f"a Decimal of exponent {value.adjusted():,} is beyond the limit of ±{MAX_DECIMAL_EXPONENT:,}"
            )
    return value


class _DecimalType(type):
    """`Decimal`'s class: every real ``decimal.Decimal`` is an instance of it (results of arithmetic included)."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, _decimal.Decimal)

    def __subclasscheck__(cls, subclass: Any) -> bool:
        return isinstance(subclass, type) and issubclass(subclass, _decimal.Decimal)


class Decimal(_decimal.Decimal, metaclass=_DecimalType):
    """``decimal.Decimal(value)``: an exact decimal number (a str such as ``"19.99"``, an int, a float, or another
    Decimal), within the bounds of the module."""

    __slots__ = ()

    def __new__(cls, value: Any = "0", context: Any = None) -> Any:
        if context is not None:
            raise TypeError("decimal.Decimal() takes no context here: arithmetic uses 28 significant digits")
        if isinstance(value, int) and value.bit_length() > MAX_DECIMAL_DIGITS * 3.33:
            raise SizeLimitError(f"Decimal() of an integer over {MAX_DECIMAL_DIGITS:,} digits is not available")
        if isinstance(value, str) and len(value) > MAX_DECIMAL_DIGITS + 100:
            raise SizeLimitError(f"Decimal() of a text of {len(value):,} characters is not available")
        return check_decimal(_decimal.Decimal(value))  # the real type, exactly as CPython's Decimal(value)


allow_attributes(
    _decimal.Decimal,
    (
        "quantize", "normalize", "to_integral_value", "to_integral_exact", "to_integral", "to_eng_string",
        "adjusted", "as_tuple", "as_integer_ratio", "is_nan", "is_zero", "is_signed", "is_finite", "is_infinite",
        "is_normal", "sqrt", "exp", "ln", "log10", "copy_abs", "copy_negate", "copy_sign", "compare", "max", "min",
        "fma", "scaleb", "real", "imag", "conjugate",
    ),
)  # fmt: skip
allow_attributes(type(_decimal.Decimal(1).as_tuple()), ("sign", "digits", "exponent", "count", "index"))


def decimal_namespace() -> Namespace:
    members: dict[str, Any] = {"Decimal": Decimal}
    members.update({name: getattr(_decimal, name) for name in dir(_decimal) if name.startswith("ROUND_")})
    for name in ("DecimalException", "InvalidOperation", "DivisionByZero", "Overflow"):
        members[name] = getattr(_decimal, name)
    return Namespace("decimal", members)


# ---------------------------------------------------------------- fractions

_EXPONENT = _re.compile(r"[eE]\s*([-+]?\d+)")


def _check_part(value: Any, what: str) -> None:
    """Refuse an integer (or a Fraction's part) over `MAX_FRACTION_BITS`, and a text whose exponent would build one."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and value.bit_length() > MAX_FRACTION_BITS:
        raise SizeLimitError(f"{what}: an integer of {value.bit_length():,} bits exceeds {MAX_FRACTION_BITS:,}")
    if isinstance(value, _fractions.Fraction):
        _check_part(value.numerator, what)
        _check_part(value.denominator, what)
    if isinstance(value, _decimal.Decimal):
        check_decimal(value)
    if isinstance(value, str):
        if len(value) > MAX_FRACTION_BITS // 3:
            raise SizeLimitError(f"{what}: a text of {len(value):,} characters is too long")
        found = _EXPONENT.search(value)
        if found is not None and abs(int(found.group(1))) > MAX_FRACTION_BITS // 4:
            raise SizeLimitError(f"{what}: the exponent {found.group(1)} would build a number past the limit")


def _of(result: Any) -> Any:
    """A library Fraction as the sandbox's `Fraction`, checked (also in a ``divmod`` pair); anything else (an int, a
    float, a bool) as it is."""
    if isinstance(result, tuple):
        return tuple(_of(item) for item in result)
    if not isinstance(result, _fractions.Fraction):
        return result
    _check_part(result, "a Fraction")
    if isinstance(result, Fraction):
        return result
    made = _fractions.Fraction.__new__(Fraction)
    made._numerator, made._denominator = result.numerator, result.denominator  # type: ignore[attr-defined]
    return made


class Fraction(_fractions.Fraction):
    """``fractions.Fraction(numerator=0, denominator=None)``: an exact ratio of integers (or of a str such as
    ``"3/7"`` or ``"0.25"``, a float, a Decimal), within the bounds of the module."""

    __slots__ = ()

    def __new__(cls, numerator: Any = 0, denominator: Any = None) -> Fraction:
        _check_part(numerator, "Fraction()")
        _check_part(denominator, "Fraction()")
        made = super().__new__(cls, numerator, denominator)
        _check_part(made, "Fraction()")
        return made

    def limit_denominator(self, max_denominator: int = 1_000_000) -> Fraction:
        return _of(super().limit_denominator(max_denominator))  # type: ignore[no-any-return]


def _checked(name: str) -> Callable[..., Any]:
    operation: Callable[..., Any] = getattr(_fractions.Fraction, name)

    def checked(self: Fraction, *others: Any) -> Any:
        for other in others:
            _check_part(other, f"Fraction {name.strip('_')}")
        if name in ("__pow__", "__rpow__") and others and isinstance(others[0], int):
            base, exponent = (self, others[0]) if name == "__pow__" else (others[0], self)
            bits = max(
                _fractions.Fraction(base).numerator.bit_length(), _fractions.Fraction(base).denominator.bit_length()
            )
            if isinstance(exponent, int) and abs(exponent) * max(bits - 1, 0) > MAX_FRACTION_BITS:
                raise SizeLimitError(f"a Fraction ** {exponent} would exceed {MAX_FRACTION_BITS:,} bits")
        return _of(operation(self, *others))

    checked.__name__ = checked.__qualname__ = name
    return checked


_OPERATORS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__divmod__", "__rdivmod__", "__pow__", "__rpow__",
    "__neg__", "__pos__", "__abs__", "__round__",
)  # fmt: skip
for _name in _OPERATORS:
    setattr(Fraction, _name, _checked(_name))

allow_attributes(
    Fraction, ("numerator", "denominator", "limit_denominator", "as_integer_ratio", "real", "imag", "conjugate")
)


def fractions_namespace() -> Namespace:
    return Namespace("fractions", {"Fraction": Fraction})
