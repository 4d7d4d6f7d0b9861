"""Red-team cases against the guards of the compiled ``python`` engine (issue 36): each path from a program to a
frame, a code object, globals or builtins, named, with what a program may try along it; and the ways a program could
outlive its limits (swallowing the deadline, recursing, building huge values).

Since the engine compiles a program with CPython, a program's functions, generators and exceptions are CPython's
own objects, with ``gi_frame``, ``__globals__``, ``__traceback__`` and the rest: every case here tries to reach
one of those through a path that does not go through the attribute allowlist by name (a format field, an
``operator`` getter, a ``copy``, a C function that calls back) or to keep running past an `Abort`.
Placeholders and detectors are `redteam_cases`' (the red-team suite's).
"""

from __future__ import annotations

from redteam_cases import LIMITED, REFUSED, Case, c

GEN = "g = (x for x in [1, 2])\n"
FUNC = "def f(a=1):\n    return a\n"
EXC = "try:\n    1 / 0\nexcept Exception as caught:\n    e = caught\n"

FRAMES = [
    c("guard-generator-gi-frame", GEN + "g.gi_frame", "a generator's frame by attribute"),
    c("guard-generator-gi-code", GEN + "g.gi_code", "a generator's code object"),
    c("guard-generator-gi-yieldfrom", GEN + "g.gi_yieldfrom", "what a generator delegates to"),
    c("guard-generator-send", GEN + "g.send(None)", "drive a generator by its methods"),
    c("guard-generator-throw", GEN + "g.throw(ValueError)", "throw into a generator's frame"),
    c("guard-generator-close", GEN + "g.close()", "close a generator from outside"),
    c("guard-generator-frame-format", GEN + "'{0.gi_frame}'.format(g)", "a generator's frame through str.format"),
    c("guard-generator-frame-format-map", GEN + "'{g.gi_frame.f_back}'.format_map({'g': g})", "frames by format_map"),
    c("guard-generator-frame-attrgetter", GEN + "operator.attrgetter('gi_frame')(g)", "operator.attrgetter"),
    c("guard-generator-frame-dotted-getter", GEN + "operator.attrgetter('gi_frame.f_globals')(g)", "a dotted path"),
    c("guard-generator-methodcaller", GEN + "operator.methodcaller('send', None)(g)", "operator.methodcaller"),
    c("guard-generator-f-back", GEN + "next(g)\ng.gi_frame.f_back.f_globals", "walk frames up from a generator"),
    c("guard-generator-copy", GEN + "copy.copy(g)", "a copy of a running frame", REFUSED),
    c("guard-generator-in-key", GEN + "sorted([g], key=lambda v: v.gi_frame)", "a frame inside a key function"),
    c("guard-coroutine-cr-frame", "async def f():\n    pass\nf().cr_frame", "a coroutine's frame"),
    c("guard-async-generator-ag-frame", "async def g():\n    yield 1\ng().ag_frame", "an async generator's frame"),
    c("guard-genexp-in-genexp", "g = (y for y in (x for x in [1]))\ng.gi_frame.f_locals", "nested generators"),
]

FUNCTIONS = [
    c("guard-function-globals", FUNC + "f.__globals__", "a function's globals (the run's symbol table)"),
    c("guard-function-builtins", FUNC + "f.__builtins__", "a function's builtins (the guards)"),
    c("guard-function-code", FUNC + "f.__code__.co_consts", "a function's code object"),
    c("guard-function-defaults", FUNC + "f.__defaults__", "a function's defaults"),
    c("guard-function-closure", "def mk():\n    x = 1\n    return lambda: x\nmk().__closure__", "closure cells"),
    c("guard-function-public-attr", FUNC + "f.name", "any attribute of a function"),
    c("guard-function-format-globals", FUNC + "'{0.__globals__[__builtins__]}'.format(f)", "globals by format"),
    c("guard-function-format-code", FUNC + "'{0.__code__}'.format(f)", "code by a format field"),
    c("guard-function-attrgetter", FUNC + "operator.attrgetter('__globals__')(f)", "globals by attrgetter"),
    c("guard-function-reduce-direct", FUNC + "f.__reduce__()", "__reduce__ of a function"),
    c("guard-function-reduce-format", FUNC + "'{0.__reduce__}'.format(f)", "__reduce__ by a format field"),
    c("guard-function-reduce", FUNC + "operator.methodcaller('__reduce_ex__', 2)(f)", "__reduce_ex__ by methodcaller"),
    c("guard-function-partial-func", FUNC + "functools.partial(f).func", "the function behind a partial"),
    c("guard-function-lru-wrapped", FUNC + "functools.lru_cache(f).__wrapped__", "the function behind a cache"),
    c("guard-function-copy-is-itself", FUNC + "__result__ = copy.deepcopy(f) is f", "a copy of a function", None),
    c(
        "guard-function-repr-opaque",
        FUNC + "__result__ = [repr(f), str(f), f'{f}', '%s' % f, format(f)]",
        "addresses",
        None,
    ),
    c(
        "guard-function-annotation-unevaluated",
        "def f(x: write_file('../canary/pwned', 'x')) -> write_file('{CANARY}/pwned', 'x'):\n    return x\n"
        "__result__ = f(1)",
        "code hidden in an annotation",
        None,
    ),
    c(
        "guard-future-annotations-unkept",
        "from __future__ import annotations\ndef f(x: '().__class__.__bases__') -> int:\n    return x\n"
        "__result__ = typing.cast(int, f(1))",
        "annotations kept as strings for someone to evaluate",
        None,
    ),
    c("guard-kwargs-dunder-key", FUNC + "f(**{'__globals__': 1})", "a dunder keyword into a function"),
    c("guard-kwargs-literal-dunder", FUNC + "f(__globals__=1)", "a literal dunder keyword"),
    c("guard-kwargs-not-a-dict", FUNC + "f(**collections.ChainMap({'a': 1}))", "a mapping that is not a dict"),
]

EXCEPTIONS = [
    c("guard-exception-traceback", EXC + "e.__traceback__", "a caught exception's traceback"),
    c("guard-exception-traceback-format", EXC + "'{0.__traceback__.tb_frame}'.format(e)", "its frame by a format"),
    c("guard-exception-traceback-getter", EXC + "operator.attrgetter('__traceback__')(e)", "its traceback by a getter"),
    c("guard-exception-with-traceback", EXC + "e.with_traceback(None)", "exception methods"),
    c("guard-exception-context", EXC + "e.__context__", "the exception it was raised during"),
    c("guard-exception-reduce", EXC + "copy.copy(e).__traceback__", "a copy's traceback"),
    c("guard-exception-args-only", EXC + "__result__ = [type_name for type_name in e.args]", "its args", None),
    c("guard-raise-baseexception-instance", "raise Exception.__base__()", "raise a BaseException"),
    c("guard-raise-non-exception", "raise 'text'", "raise what is not an exception", REFUSED),
    c("guard-raise-cause-non-exception", "raise ValueError() from 1", "a cause that is not an exception", REFUSED),
    c("guard-except-non-class", "try:\n    1 / 0\nexcept 1:\n    pass", "catch with a non-class", REFUSED),
]

DESCRIPTORS = [
    c("guard-descriptor-get", "str.upper.__get__('a')", "a method descriptor's __get__"),
    c("guard-descriptor-objclass", "str.upper.__objclass__", "the class behind a descriptor"),
    c("guard-descriptor-bound-self", "m = [].append\nm.__self__", "the object of a bound method"),
    c("guard-descriptor-bound-format", "m = [].append\n'{0.__self__}'.format(m)", "a bound method's self by a format"),
    c("guard-descriptor-class-format", "'{0.__class__.__mro__}'.format(1)", "a class's MRO by a format"),
    c("guard-descriptor-unbound-format", "f = str.format\nf('{0.__class__}', 1)", "str.format held unbound"),
    c("guard-descriptor-generic-alias", "list[int].__origin__", "a generic alias's class"),
    c("guard-descriptor-generic-alias-mro", "list[int].mro()", "a generic alias passes attributes to its class"),
    c("guard-descriptor-dict-view-mapping", "d = {1: 2}\nv = d.items()\nv.mapping", "a view's mapping"),
    c("guard-descriptor-namespace-members", "m = math\nm.members", "a namespace's member table"),
    c("guard-descriptor-print-self", "print.__self__", "the object behind print"),
]

LIMITS = [
    c(
        "guard-timeout-bare-except",
        "while True:\n    try:\n        while True:\n            pass\n    except:\n        pass",
        "catch the deadline in a loop",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-finally-return",
        "def f():\n    try:\n        while True:\n            pass\n    finally:\n        return 1\n__result__ = f()",
        "a return in finally swallows the deadline",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-finally-continue",
        "for i in range(10 ** 9):\n    try:\n        while True:\n            pass\n    finally:\n        continue",
        "a continue in finally swallows it again",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-finally-break",
        "while True:\n    for i in range(2):\n        try:\n            while True:\n"
        "                pass\n        finally:\n            break",
        "a break in finally",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-finally-raises",
        "while True:\n    try:\n        try:\n            while True:\n"
        "                pass\n        finally:\n            raise ValueError('replaced')\n    except ValueError:\n"
        "        pass",
        "replace the deadline with an error that is caught",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-except-clause-runs",
        "def f():\n    while True:\n        try:\n            raise ValueError\n"
        "        except ValueError:\n            pass\ntry:\n    while True:\n        pass\nexcept f():\n    pass",
        "run code while the deadline is on its way",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-in-generator-drained-by-c",
        "try:\n    sum(1 for x in iter(int, 1))\nexcept Exception:\n    __result__ = 'caught'",
        "catch the deadline raised in a generator",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-in-key-function",
        "try:\n    sorted(range(10), key=lambda v: [w for w in iter(int, 1)])\n"
        "except Exception:\n    __result__ = 'caught'",
        "the deadline inside a callback",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-recursion-retries",
        "def f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return f(n + 1)\nf(0)",
        "retry at the recursion limit, forever",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-timeout-tool-calls-in-finally",
        "try:\n    while True:\n        pass\nfinally:\n    write_file('after-deadline.txt', 'x')",
        "a tool call after the deadline",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "guard-memory-caught",
        "s = 'x'\ntry:\n    s * 10 ** 10\nexcept Exception:\n    __result__ = 'caught'",
        "catch running out of memory",
        frozenset({"MEMORY_LIMIT"}),
    ),
    c(
        "guard-memory-list-caught",
        "x = [0]\ntry:\n    y = x * 10 ** 10\nexcept Exception:\n    __result__ = 'caught'",
        "catch a list's allocation failing",
        frozenset({"MEMORY_LIMIT"}),
    ),
    c(
        "guard-size-limit-caught",
        "try:\n    2 ** 10 ** 8\nexcept Exception:\n    __result__ = 'caught'",
        "catch a size limit",
        frozenset({"MEMORY_LIMIT"}),
    ),
    c("guard-recursion-deep", "def f(n):\n    return f(n + 1) + 1\nf(0)", "recurse without bound", LIMITED),
    c(
        "guard-recursion-through-sorted",
        "def f(n):\n    return sorted([n], key=lambda v: f(v + 1))\nf(0)",
        "recurse through C",
        LIMITED,
    ),
    c(
        "guard-recursion-through-format",
        "def f(n):\n    return '{}'.format(f(n + 1))\nf(0)",
        "through a format",
        LIMITED,
    ),
    c("guard-huge-squaring", "x = 3\nfor i in range(64):\n    x = x * x", "square a number until it is huge", LIMITED),
    c("guard-huge-sum", "x = 1 << 999_999\ny = x\nfor i in range(3):\n    y = y + x", "add past the limit", LIMITED),
    c(
        "guard-huge-augmented-item",
        "d = {'k': 1 << 999_999}\nfor i in range(3):\n    d['k'] += d['k']",
        "add past the limit in place",
        LIMITED,
    ),
    c("guard-huge-power-augmented", "x = 10\nx **= 10 ** 8", "a power in place", LIMITED),
    c("guard-huge-shift-augmented", "x = 1\nx <<= 10 ** 10", "a shift in place", LIMITED),
    c("guard-huge-repeat-literal", "'ab' * 10 ** 9", "repeat a literal", LIMITED),
    c("guard-huge-percent-template", "t = b'%99999999d'\nlen(t % 1)", "a %-format width from a name", LIMITED),
    c("guard-huge-fstring-spec", "w = 10 ** 9\nf'{1:>{w}}'", "a run-time width in an f-string", LIMITED),
    c("guard-huge-join-separator", "sep = '-' * 100000\nsep.join(['a'] * 200)", "a separator repeated", LIMITED),
]

NAMES = [
    c("guard-name-temporary", "__attp_t", "the rewrite's temporary"),
    c("guard-name-guard", "__attp_attr('', 'join')", "a guard by name"),
    c("guard-name-builtins", "__builtins__", "the run's builtins"),
    c("guard-name-global-guard", "def f():\n    global __attp_type\n    __attp_type = len\nf()", "rebind a guard"),
    c("guard-name-walrus-guard", "(__attp_type := len)", "rebind a guard by :="),
    c("guard-name-import-guard", "import json as __attp_attr", "rebind a guard by import"),
    c("guard-name-unknown-builtin", "open('{CANARY}/secret.txt')", "a CPython builtin not offered"),
    c("guard-name-star-import-builtins", "from math import *\n__result__ = open", "builtins by a star import"),
]

CASES: list[Case] = [*FRAMES, *FUNCTIONS, *EXCEPTIONS, *DESCRIPTORS, *LIMITS, *NAMES]

CONTROLS: list[tuple[str, str, object]] = [
    (
        "guard-control-methods",
        "s = ' a,b '\n__result__ = [s.strip().split(','), [1, 2].index(2), {'k': 1}.get('k')]",
        [["a", "b"], 1, 1],
    ),
    (
        "guard-control-text",
        "x = 3.5\n__result__ = [str(x), f'{x:.1f}', '%s!' % x, repr(None), f'{[1]}']",
        ["3.5", "3.5", "3.5!", "None", "[1]"],
    ),
    ("guard-control-except", "try:\n    {}['k']\nexcept (KeyError, ValueError) as e:\n    __result__ = e.args[0]", "k"),
    (
        "guard-control-finally",
        "out = []\nfor i in range(3):\n    try:\n        continue\n    finally:\n"
        "        out.append(i)\n__result__ = out",
        [0, 1, 2],
    ),
    ("guard-control-big-within", "x = 1 << 999_998\n__result__ = (x + x).bit_length()", 1_000_000),
    ("guard-control-recursion", "def d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\n__result__ = d(900)", 900),
    ("guard-control-items", "d = {'a': 2}\nd['a'] += 3\nd['a'] **= 2\n__result__ = d", {"a": 25}),
]
