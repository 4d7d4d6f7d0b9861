"""Functions a program defines, the cells their closures share, and lazy generator expressions.

A `Function` is what ``def`` and ``lambda`` make: callable from the program and from C code (``sorted``
keys, ``re.sub`` callbacks, ``map``), and opaque: the sandbox's attribute policy refuses every
attribute of it, its repr names only the function, it cannot be copied or pickled into its parts,
and it holds nothing but what the program itself defined (its code, defaults and captured cells).

A frame is a plain dict, name -> value, one per call; a captured name's value sits in a `Cell` that the
defining frame and every closure share, as in CPython.
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from attp_server.sandbox.limits import SizeLimitError

Frame = dict[str, Any]
Body = Callable[[Frame], Any]


def locate(exc: BaseException, node: ast.AST) -> None:
    """Stamp `exc` with where it happened, unless a statement nearer to it already did."""
    if not hasattr(exc, "attp_line"):
        with contextlib.suppress(AttributeError):
            exc.attp_line = (node.lineno, node.col_offset)  # type: ignore[attr-defined]


def out_of_memory(node: ast.AST) -> SizeLimitError:
    return SizeLimitError(f"the program ran out of memory at line {getattr(node, 'lineno', '?')}")


class Budget(Protocol):
    """The evaluator's step budget: every loop iteration spends one step (``left -= 1``), and so does every
    call when the deadline is not a timer signal (`tick_calls`); `spend` runs when the countdown is out."""

    left: int
    tick_calls: bool

    def spend(self) -> None: ...


class Cell:
    """One captured variable, shared by the scope that binds it and the closures that use it."""

    __slots__ = ("value",)
    value: Any

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("cannot copy or pickle a closure cell")


class Code:
    """Everything about a ``def`` or ``lambda`` that does not change between its definitions.

    Built once per definition node; each run of the ``def`` statement makes a new `Function` from it
    with the defaults and cells of that moment.
    """

    def __init__(
        self,
        name: str,
        body: Body,
        *,
        positional: list[str],
        posonly: int,
        vararg: str | None,
        kwonly: list[str],
        varkw: str | None,
        cellvars: list[str],
        freevars: list[str],
        budget: Budget,
        where: ast.AST,
    ) -> None:
        self.name = name
        self.body = body
        self.positional = positional
        self.posonly = posonly
        self.vararg = vararg
        self.kwonly = kwonly
        self.varkw = varkw
        self.keywords = frozenset(positional[posonly:]) | frozenset(kwonly)
        self.param_cells = [p for p in (*positional, vararg, *kwonly, varkw) if p is not None and p in cellvars]
        self.new_cells = [c for c in cellvars if c not in self.param_cells]
        self.freevars = freevars
        self.budget = budget
        self.where = where
        """Where an error no statement located is reported: a lambda's expression, or the ``def`` line."""

    def bind(self, function: Function, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Frame:
        """A new frame for a call, its arguments bound as CPython binds them (same errors, same messages)."""
        name, positional = self.name, self.positional
        frame: Frame = {}
        count = len(args)
        if count > len(positional):
            if self.vararg is None:
                defaults = len(function.defaults)
                takes = f"from {len(positional) - defaults} to {len(positional)}" if defaults else len(positional)
                raise TypeError(
                    f"{name}() takes {takes} positional argument{_s(len(positional))} but {count} "
                    f"{'was' if count == 1 else 'were'} given"
                )
            frame[self.vararg] = args[len(positional) :]
            args = args[: len(positional)]
        elif self.vararg is not None:
            frame[self.vararg] = ()
        for parameter, value in zip(positional, args, strict=False):
            frame[parameter] = value
        extra: dict[str, Any] = {}
        for key, value in kwargs.items():
            if key in self.keywords:
                if key in frame:
                    raise TypeError(f"{name}() got multiple values for argument '{key}'")
                frame[key] = value
            elif self.varkw is not None:
                extra[key] = value
            elif key in positional:
                raise TypeError(f"{name}() got some positional-only arguments passed as keyword arguments: '{key}'")
            else:
                raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
        first_default = len(positional) - len(function.defaults)
        missing = []
        for index, parameter in enumerate(positional):
            if parameter not in frame:
                if index >= first_default:
                    frame[parameter] = function.defaults[index - first_default]
                else:
                    missing.append(parameter)
        if missing:
            raise TypeError(
                f"{name}() missing {len(missing)} required positional argument{_s(len(missing))}: {_names(missing)}"
            )
        for parameter in self.kwonly:
            if parameter not in frame:
                if parameter in function.kwdefaults:
                    frame[parameter] = function.kwdefaults[parameter]
                else:
                    missing.append(parameter)
        if missing:
            raise TypeError(
                f"{name}() missing {len(missing)} required keyword-only argument{_s(len(missing))}: {_names(missing)}"
            )
        if self.varkw is not None:
            frame[self.varkw] = extra
        return frame

    def call(self, function: Function, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The slow path: any arguments, any signature."""
        where = self.where
        frame = self.bind(function, args, kwargs)
        self.enclose(function, frame)
        budget = self.budget
        tick = budget.tick_calls
        if tick:
            budget.left -= 1
            if budget.left < 0:
                budget.spend()
        try:
            return self.body(frame)
        except MemoryError:
            raise out_of_memory(where) from None
        except BaseException as exc:
            locate(exc, where)
            raise

    def enclose(self, function: Function, frame: Frame) -> None:
        """Put the call's cells in its frame: fresh ones for captured locals, the definition's for free names."""
        for parameter in self.param_cells:
            cell = Cell()
            cell.value = frame[parameter]
            frame[parameter] = cell
        for name in self.new_cells:
            frame[name] = Cell()
        if function.closure:
            frame.update(function.closure)

    def entry(self, function: Function) -> tuple[int, Callable[..., Any]]:
        """The fast path for a call with exactly as many positional arguments as the function has parameters.

        Returns (that count, a closure taking them), or (-1, the general path) when the signature has
        ``*args``, ``**kwargs``, keyword-only parameters or more than three parameters. Call sites check
        the count and call the closure directly: no argument tuple, no binding loop.
        """
        body, budget, names, where = self.body, self.budget, self.positional, self.where
        tick = budget.tick_calls
        if self.vararg is not None or self.varkw is not None or self.kwonly or len(names) > 3:
            return -1, lambda *args: self.call(function, args, {})
        closure = function.closure
        if self.param_cells or self.new_cells:
            enclose = self.enclose

            def enter_cells(*args: Any) -> Any:
                frame = dict(zip(names, args, strict=True))
                enclose(function, frame)
                if tick:
                    budget.left -= 1
                    if budget.left < 0:
                        budget.spend()
                try:
                    return body(frame)
                except MemoryError:
                    raise out_of_memory(where) from None
                except BaseException as exc:
                    locate(exc, where)
                    raise

            return len(names), enter_cells
        if not names:

            def enter0() -> Any:
                if tick:
                    budget.left -= 1
                    if budget.left < 0:
                        budget.spend()
                try:
                    return body(closure.copy())
                except MemoryError:
                    raise out_of_memory(where) from None
                except BaseException as exc:
                    locate(exc, where)
                    raise

            return 0, enter0
        if len(names) == 1:
            (first,) = names
            if closure:

                def enter1_closure(a: Any) -> Any:
                    frame = closure.copy()
                    frame[first] = a
                    if tick:
                        budget.left -= 1
                        if budget.left < 0:
                            budget.spend()
                    try:
                        return body(frame)
                    except MemoryError:
                        raise out_of_memory(where) from None
                    except BaseException as exc:
                        locate(exc, where)
                        raise

                return 1, enter1_closure

            def enter1(a: Any) -> Any:
                if tick:
                    budget.left -= 1
                    if budget.left < 0:
                        budget.spend()
                try:
                    return body({first: a})
                except MemoryError:
                    raise out_of_memory(where) from None
                except BaseException as exc:
                    locate(exc, where)
                    raise

            return 1, enter1
        if len(names) == 2:
            first, second = names

            def enter2(a: Any, b: Any) -> Any:
                frame = closure.copy()
                frame[first] = a
                frame[second] = b
                if tick:
                    budget.left -= 1
                    if budget.left < 0:
                        budget.spend()
                try:
                    return body(frame)
                except MemoryError:
                    raise out_of_memory(where) from None
                except BaseException as exc:
                    locate(exc, where)
                    raise

            return 2, enter2
        first, second, third = names

        def enter3(a: Any, b: Any, c: Any) -> Any:
            frame = closure.copy()
            frame[first] = a
            frame[second] = b
            frame[third] = c
            if tick:
                budget.left -= 1
                if budget.left < 0:
                    budget.spend()
            try:
                return body(frame)
            except MemoryError:
                raise out_of_memory(where) from None
            except BaseException as exc:
                locate(exc, where)
                raise

        return 3, enter3


class Function:
    """A function the program defined. Nothing of it is reachable from the program but calling it."""

    __slots__ = (
        "__name__",
        "__qualname__",
        "arity",
        "body",
        "closure",
        "code",
        "defaults",
        "enter",
        "first",
        "kwdefaults",
    )

    def __init__(self, code: Code, defaults: tuple[Any, ...], kwdefaults: dict[str, Any], closure: Frame) -> None:
        self.code = code
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure
        self.__name__ = self.__qualname__ = code.name
        self.arity, self.enter = code.entry(self)
        plain = self.arity >= 0 and not code.param_cells and not code.new_cells
        self.body: Body | None = code.body if plain else None
        """Set when a call site may build the frame itself (its parameters, plus `closure`'s cells when it has
        some): no cells of its own, positional parameters only."""
        self.first: str | None = code.positional[0] if plain and self.arity == 1 else None

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        if kwargs or len(args) != self.arity:
            return self.code.call(self, args, kwargs)
        return self.enter(*args)

    def __repr__(self) -> str:
        return f"<sandbox function {self.code.name}>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"cannot copy or pickle function {self.code.name}")

    def __copy__(self) -> Function:
        return self  # functions are immutable, as in CPython (copy.copy(f) is f)

    def __deepcopy__(self, memo: Any) -> Function:
        return self


Function.__name__ = Function.__qualname__ = "function"  # what CPython's messages call it ("'function' object ...")


class Generator:
    """A generator expression's value: lazy, as in CPython, and opaque (no frame, no code, no repr address)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items

    def __iter__(self) -> Generator:
        return self

    def __next__(self) -> Any:
        return next(self._items)

    def __repr__(self) -> str:
        return "<generator object <genexpr>>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("cannot copy or pickle a generator")


Generator.__name__ = Generator.__qualname__ = "generator"


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _names(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + f"{',' if len(quoted) > 2 else ''} and {quoted[-1]}"
