"""A fresh red team against the guards of the compiled ``python`` engine (issue 36), after `redteam_guards`.

Each case is a hostile program and what it is after, by category: generators' frames, tracebacks and exception
objects, format strings, descriptors and ``__reduce__``, ``operator``/``functools`` paths, the rewrite's own names,
what a program's text shows of a CPython object (an address is a leak), huge values, recursion and the deadline.
`SHOWN` are programs whose whole answer (result, output, error) must show no address; `CONTROLS` are the language
a model writes, which the guards must not break. Placeholders and detectors are `redteam_cases`' (the red-team
suite's).
"""

from __future__ import annotations

from redteam_cases import LIMITED, REFUSED, Case, c

GEN = "g = (x for x in [1, 2])\n"
FUNC = "def f(a=1):\n    return a\n"
EXC = "try:\n    1 / 0\nexcept Exception as caught:\n    e = caught\n"
TIMEOUT = frozenset({"TIMEOUT"})
SIZE = frozenset({"MEMORY_LIMIT"})

FRAMES = [
    c("fresh-gen-frame-via-next-iter", GEN + "next(iter([g])).gi_frame", "a frame off a value a call returned"),
    c("fresh-gen-running", GEN + "g.gi_running", "a generator's state attribute"),
    c("fresh-gen-frame-dotted-format", GEN + "'{0.gi_frame.f_back.f_globals}'.format(g)", "frames by a dotted field"),
    c("fresh-gen-code-index-format", GEN + "'{0[0].gi_code.co_consts}'.format([g])", "code by an index field"),
    c("fresh-gen-returned-by-def", "def mk():\n    return (x for x in [1])\nmk().gi_frame", "a function's generator"),
    c("fresh-gen-frame-in-lambda-default", GEN + "(lambda a=g.gi_frame: a)()", "a frame read by a default"),
    c("fresh-gen-frame-decorator", "@operator.attrgetter('gi_frame')\ndef f():\n    pass", "a decorator reads it"),
    c(
        "fresh-gen-frame-reduce-getter",
        GEN + "functools.reduce(lambda a, n: operator.attrgetter(n)(a), ['gi_frame', 'f_back'], g)",
        "a getter folded over a path",
    ),
    c("fresh-gen-close-methodcaller-key", GEN + "min([g], key=operator.methodcaller('close'))", "close by a key"),
    c("fresh-zip-object-attribute", GEN + "zip(g).gi_frame", "a frame through a zip object"),
    c(
        "fresh-gen-in-comprehension-walrus",
        "x = 1\n[x.real for _ in [0] if (x := (y for y in [1]))]",
        "a receiver swapped to a generator by :=",
    ),
]

EXCEPTIONS = [
    c("fresh-exc-traceback-format-map", EXC + "'{e.__traceback__.tb_frame}'.format_map({'e': e})", "by format_map"),
    c("fresh-exc-tb-frame-getter", EXC + "operator.attrgetter('tb_frame')(e)", "a traceback's name on the error"),
    c("fresh-exc-cause-getter", EXC + "operator.attrgetter('__cause__')(e)", "the cause by a getter"),
    c(
        "fresh-exc-args-generator-frame",
        "try:\n    raise ValueError((x for x in [1]))\nexcept ValueError as e:\n    e.args[0].gi_frame",
        "a frame through an error's args",
    ),
    c("fresh-exc-with-traceback-methodcaller", EXC + "operator.methodcaller('with_traceback', None)(e)", "a method"),
    c("fresh-exc-base-exception", "raise BaseException('x')", "raise past every except clause"),
    c("fresh-exc-system-exit", "raise SystemExit", "end the worker"),
    c("fresh-exc-exception-group", "raise ExceptionGroup('x', [ValueError()])", "an exception group"),
    c(
        "fresh-exc-except-tuple-non-class",
        "try:\n    1 / 0\nexcept (ZeroDivisionError, 1):\n    pass",
        "catch with a tuple holding a non-class",
        None,
    ),
    c("fresh-exc-assign-args", EXC + "e.args = ('x',)", "assign an exception's attribute"),
    c("fresh-exc-name-after-handler", EXC + "__result__ = caught", "the handler's name after its block"),
    c("fresh-exc-raise-from-itself", EXC + "raise e from e", "a cause cycle", frozenset({"RUNTIME_ERROR"})),
]

FORMATS = [
    c(
        "fresh-format-nested-spec-map",
        "'{a:{w}}'.format_map({'a': 1, 'w': '>99999999'})",
        "a width by format_map",
        LIMITED | REFUSED,
    ),
    c(
        "fresh-format-repr-conversion-spec",
        GEN + "'{0!r:{1}}'.format(g, '>99999999')",
        "a width after !r",
        LIMITED | REFUSED,
    ),
    c(
        "fresh-fstring-spec-built",
        "w = '99999999'\nf'{1:{\"0>\" + w}}'",
        "a spec built in the f-string",
        LIMITED | REFUSED,
    ),
    c("fresh-percent-star-precision", "'%.*f' % (10 ** 8, 1.0)", "a '*' precision", LIMITED | REFUSED),
    c("fresh-percent-mapping-width", "'%(x)0999999999d' % {'x': 1}", "a width after a mapping key", LIMITED),
    c("fresh-percent-mapping-nested-parens", "'%(a(b)0999999999d' % {'a(b': 1}", "parentheses in a key", LIMITED),
    c("fresh-format-namespace-index", "'{0[sqrt]}'.format(math)", "a module by an index field"),
    c("fresh-format-digits-of-huge", "'{:,}'.format(1 << 999_999)", "digits of a huge integer", LIMITED),
    c(
        "fresh-format-spec-of-datetime-bomb",
        "w = '%c' * 5000\nlen(format(datetime.date(2024, 1, 1), w))",
        "strftime through format",
        None,
    ),
]

DESCRIPTORS = [
    c("fresh-descriptor-self-getter", "operator.attrgetter('__self__')([].append)", "a bound method's self"),
    c("fresh-descriptor-class-method-self", "dict.fromkeys.__self__", "the class behind a classmethod"),
    c("fresh-reduce-ex-format", "'{0.__reduce_ex__}'.format(1)", "__reduce_ex__ by a format field"),
    c("fresh-getstate-methodcaller", "operator.methodcaller('__getstate__')([])", "__getstate__ by methodcaller"),
    c("fresh-reduce-of-copy", EXC + "copy.deepcopy(e)", "a deep copy reduces an exception", None),
    c("fresh-property-builtin", "property(lambda s: 1)", "a descriptor class"),
    c("fresh-type-call", "type(1)", "the type of a value"),
    c("fresh-vars-call", "vars()", "the run's variables"),
    c("fresh-globals-builtins", "globals()['__builtins__']", "the run's globals"),
    c("fresh-object-subclasses", "object.__subclasses__()", "every class"),
    c("fresh-super-call", "def f():\n    return super()\nf()", "super without a class"),
    c("fresh-class-attr-not-listed", "enumerate.mro()", "a builtin class's metaclass methods"),
    c("fresh-exception-class-mro", "ValueError.mro()", "an exception class's MRO"),
    c(
        "fresh-unbound-strftime",
        "datetime.date.strftime(datetime.date(2024, 1, 1), '%c' * 4000)",
        "strftime unbound skips its size check",
    ),
]

OPERATORS = [
    c("fresh-operator-getter-dotted-dunder", "operator.attrgetter('real.__class__')(1)", "a dunder in a dotted path"),
    c("fresh-operator-itemgetter-generator", GEN + "operator.itemgetter(0)(g)", "an item of a generator"),
    c("fresh-operator-setitem-namespace", "operator.setitem(math, 'pi', 3)", "patch a module"),
    c("fresh-operator-delitem-namespace", "operator.delitem(json, 'loads')", "delete from a module"),
    c("fresh-operator-ipow", "operator.ipow(10, 10 ** 8)", "an in-place operator not offered"),
    c("fresh-operator-pow-huge", "operator.pow(10, 10 ** 8)", "a power through operator", LIMITED),
    c("fresh-operator-lshift-huge", "operator.lshift(1, 10 ** 10)", "a shift through operator", LIMITED),
    c("fresh-operator-mul-huge", "operator.mul('ab', 10 ** 9)", "a repeat through operator", LIMITED),
    c("fresh-operator-concat-huge", "s = 'a' * 6_000_000\noperator.concat(s, s)", "a concat over the limit", LIMITED),
    c("fresh-operator-mod-width", "operator.mod('%0999999999d', 1)", "a %-width through operator", LIMITED),
    c("fresh-reduce-mul-huge", "functools.reduce(operator.mul, [10 ** 100000] * 100)", "a product folded", LIMITED),
    c(
        "fresh-starmap-getter",
        GEN + "list(itertools.starmap(operator.attrgetter, [('gi_frame',)]))[0](g)",
        "a getter made by starmap",
    ),
    c("fresh-partial-getattr", "functools.partial(getattr, 1)('__class__')", "getattr by a partial"),
    c(
        "fresh-cmp-to-key-frame",
        GEN + "sorted([g, g], key=functools.cmp_to_key(lambda a, b: a.gi_frame))",
        "a frame in a comparison",
    ),
]

NAMES = [
    c("fresh-name-param-guard", "def f(__attp_attr):\n    return 1", "a guard's name as a parameter"),
    c("fresh-name-lambda-param-temp", "(lambda __attp_t: 1)(2)", "the temporary as a lambda parameter"),
    c("fresh-name-nonlocal-temp", "def f():\n    def g():\n        nonlocal __attp_t\n    return g", "nonlocal"),
    c("fresh-name-except-as-guard", "try:\n    1 / 0\nexcept Exception as __attp_type:\n    pass", "a handler's name"),
    c("fresh-name-for-target-temp", "for __attp_t in [1]:\n    pass", "a loop target"),
    c("fresh-name-comprehension-temp", "[__attp_tc for __attp_tc in [1]]", "a comprehension variable"),
    c("fresh-name-del-guard", "del __attp_attr", "delete a guard"),
    c("fresh-name-kwargs-guard-key", FUNC + "f(**{'__attp_attr': 1})", "a guard's name as a keyword"),
    c("fresh-name-kwargs-dunder-builtin", "dict(**{'__class__': 1})", "a dunder keyword into a builtin"),
    c("fresh-name-kwargs-int-key", FUNC + "f(**{1: 2})", "a keyword that is not a name"),
    c("fresh-name-kwargs-private-to-builtin", "sorted([2, 1], **{'_key': len})", "a private keyword to a builtin"),
    c("fresh-name-import-as-name", "import math as __name__", "rebind __name__"),
    c("fresh-name-star-import-in-def", "def f():\n    from math import *", "a star import in a function"),
    c("fresh-name-match", "match 1:\n    case 1:\n        pass", "a match statement"),
    c("fresh-name-class", "class A:\n    pass", "a class"),
    c("fresh-name-yield-in-lambda", "(lambda: (yield))()", "a generator made by a lambda"),
    c("fresh-name-dict-unpack-module", "{**math}", "a module unpacked as a mapping"),
    c("fresh-name-builtins-subscript", "print['__self__']", "an item of print"),
]

LIMITS = [
    c("fresh-huge-power-of-big-base", "(1 << 999_999) ** 2", "a power of a big integer", SIZE),
    c("fresh-huge-pow-builtin-big-base", "x = 1 << 999_999\npow(x, 3)", "pow of a big integer", SIZE),
    c("fresh-huge-power-huge-exponent", "2 ** (1 << 20_000)", "an exponent too long to show", SIZE),
    c("fresh-huge-bytes-literal-repeat", "b'ab' * 10 ** 9", "repeat a bytes literal", LIMITED),
    c("fresh-huge-bytearray-repeat", "bytearray(b'x') * 10 ** 10", "repeat a bytearray", LIMITED),
    c("fresh-huge-ljust", "'x'.ljust(10 ** 9)", "a padding", LIMITED),
    c("fresh-huge-list-repeat-twice", "[0] * 10 ** 7 * 100", "a checked repeat repeated again", LIMITED),
    c("fresh-huge-hex-int-squared", "x = int('f' * 3_000_000, 16)\nx * x", "an integer from hex text", LIMITED),
    c("fresh-huge-int-to-text", "str(1 << 999_999)", "the digits of a huge integer", LIMITED),
    c("fresh-c-max-range", "max(range(10 ** 10))", "a long C loop that never looks at signals", TIMEOUT),
    c("fresh-c-sum-range", "sum(range(10 ** 10))", "a long C sum", TIMEOUT),
    c("fresh-c-regex-backtracking", "re.match('(a+)+$', 'a' * 40 + 'b')", "catastrophic backtracking", TIMEOUT),
    c("fresh-c-deque-drain", "collections.deque(itertools.repeat(1, 10 ** 11), maxlen=0)", "a C drain", TIMEOUT),
    c("fresh-c-lcm", "math.lcm(*range(1, 200000))", "a long C computation", TIMEOUT),
    c("fresh-c-hash-deep-tuple", "t = ()\nfor i in range(300000):\n    t = (t,)\nhash(t)", "C stack overflow", LIMITED),
    c(
        "fresh-c-nested-map",
        "c = iter([1])\nfor i in range(300000):\n    c = map(abs, c)\nnext(c)",
        "C recursion through iterators",
        LIMITED,
    ),
    c("fresh-c-deep-repr", "x = []\nfor i in range(300000):\n    x = [x]\nrepr(x)", "a deep repr", LIMITED),
    c("fresh-recursion-through-map", "def f(n):\n    return list(map(f, [n + 1]))\nf(0)", "recursion in C", LIMITED),
    c(
        "fresh-recursion-through-factory",
        "def f():\n    return '{x}'.format_map(collections.defaultdict(f))\nf()",
        "recursion through a format's mapping",
        LIMITED,
    ),
    c(
        "fresh-recursion-in-except-clause",
        "def f():\n    try:\n        raise ValueError\n    except f():\n        pass\nf()",
        "recursion in an except clause",
        LIMITED,
    ),
    c("fresh-timeout-in-join", "''.join(str(x) for x in iter(int, 1))", "no end inside join", LIMITED),
    c(
        "fresh-timeout-in-sub-callback",
        "try:\n    re.sub('a', lambda m: str([0 for _ in iter(int, 1)]), 'a')\n"
        "except Exception:\n    __result__ = 'caught'",
        "the deadline inside re.sub's callback",
        TIMEOUT,
    ),
    c(
        "fresh-timeout-in-factory",
        "def f():\n    while True:\n        pass\ntry:\n"
        "    '{x}'.format_map(collections.defaultdict(f))\nexcept Exception:\n    __result__ = 'caught'",
        "the deadline in a factory called by a format",
        TIMEOUT,
    ),
    c(
        "fresh-timeout-in-reduce",
        "try:\n    functools.reduce(lambda a, b: [0 for _ in iter(int, 1)], [1, 2])\nexcept Exception:\n    pass",
        "the deadline in reduce's callback",
        TIMEOUT,
    ),
    c(
        "fresh-timeout-retried-in-finally",
        "def f():\n    try:\n        while True:\n            pass\n    finally:\n        f()\nf()",
        "run again from finally",
        TIMEOUT,
    ),
]

CASES: list[Case] = [*FRAMES, *EXCEPTIONS, *FORMATS, *DESCRIPTORS, *OPERATORS, *NAMES, *LIMITS]

SHOWN: list[tuple[str, str]] = [
    ("fresh-shown-slice-str", FUNC + "__result__ = str(slice(f))"),
    ("fresh-shown-slice-repr", FUNC + "__result__ = repr(slice(f, 1))"),
    ("fresh-shown-slice-fstring", FUNC + "__result__ = f'{slice(f)}'"),
    ("fresh-shown-slice-percent", FUNC + "__result__ = '%s' % (slice(f),)"),
    ("fresh-shown-slice-in-list", FUNC + "__result__ = '%s' % [slice(f)]"),
    ("fresh-shown-slice-format", FUNC + "__result__ = '{}'.format(slice(f))"),
    ("fresh-shown-slice-print", FUNC + "print(slice(None, f))"),
    ("fresh-shown-bytes-percent-a", FUNC + "__result__ = (b'%a' % f).decode()"),
    ("fresh-shown-bytes-percent-r", FUNC + "__result__ = (b'%r' % (f,)).decode()"),
    ("fresh-shown-bytes-percent-mapping", FUNC + "__result__ = (b'%(k)r' % {b'k': f}).decode()"),
    ("fresh-shown-str-starred", FUNC + "__result__ = str(*[f])"),
    ("fresh-shown-generator-fstring", GEN + "__result__ = [f'{g}', f'{g!r}', '%r' % (g,), str(g)]"),
    ("fresh-shown-error-message", FUNC + "raise ValueError(f, 1)"),
    ("fresh-shown-key-error", FUNC + "{}[f]"),
]
"""Programs whose answer shows a CPython object's text: never its address."""

CONTROLS: list[tuple[str, str, object]] = [
    ("fresh-control-join-map-str", "__result__ = ', '.join(map(str, [1, 2.5, None]))", "1, 2.5, None"),
    (
        "fresh-control-isinstance-tuple",
        "__result__ = [isinstance('a', (int, str)), isinstance(1.5, str)]",
        [True, False],
    ),
    (
        "fresh-control-format-fields",
        "__result__ = '{name}: {value:.2f} {0[k]}'.format({'k': 5}, name='x', value=1.234)",
        "x: 1.23 5",
    ),
    ("fresh-control-fstring-conversion", "x = 'ab'\n__result__ = f'{x!r:>6}|{3:03d}'", "  'ab'|003"),
    ("fresh-control-percent", "__result__ = '%s and %d and %r' % ('a', 3, 'b')", "a and 3 and 'b'"),
    ("fresh-control-bytes-percent", "__result__ = (b'%s-%d-%r' % (b'ab', 5, b'c')).decode()", "ab-5-b'c'"),
    (
        "fresh-control-slice-text",
        "__result__ = [str(slice(1, 5)), repr(slice(None, 'a')), f'{slice(2)}']",
        ["slice(1, 5, None)", "slice(None, 'a', None)", "slice(None, 2, None)"],
    ),
    ("fresh-control-str-starred", "__result__ = [str(*[5]), str(*[b'x', 'ascii'])]", ["5", "x"]),
    (
        "fresh-control-sort-keys",
        "rows = [{'n': 'b', 'v': 2}, {'n': 'a', 'v': 1}]\n"
        "__result__ = [r['n'] for r in sorted(rows, key=operator.itemgetter('v'))] + [max(['aa', 'b'], key=len)]",
        ["a", "b", "aa"],
    ),
    (
        "fresh-control-generator-next",
        "g = (x * 2 for x in range(3))\n__result__ = [next(g), list(g), next(g, 'done')]",
        [0, [2, 4], "done"],
    ),
    (
        "fresh-control-nonlocal-global",
        "n = 0\ndef bump():\n    global n\n    n += 1\ndef counter():\n    c = 0\n"
        "    def inc():\n        nonlocal c\n        c += 1\n        return c\n    return inc\ni = counter()\ni()\nbump()\n"
        "__result__ = [i(), n]",
        [2, 1],
    ),
    (
        "fresh-control-lru-cache",
        "@functools.lru_cache(maxsize=None)\ndef fib(n):\n    return n if n < 2 else "
        "fib(n - 1) + fib(n - 2)\n__result__ = fib(90)",
        2880067194370816120,
    ),
    (
        "fresh-control-lambda-defaults",
        "fs = [lambda i=i: i * i for i in range(3)]\n__result__ = [f() for f in fs]",
        [0, 1, 4],
    ),
    ("fresh-control-walrus-method", "__result__ = [y.upper() for x in ['a', ''] if (y := x.strip())]", ["A"]),
    (
        "fresh-control-receiver-once",
        "c = []\ndef g():\n    c.append(1)\n    return ' a '\n__result__ = [g().strip(), g().upper().strip(), len(c)]",
        ["a", "A", 2],
    ),
    (
        "fresh-control-key-read-once",
        "d = {'a': 1, 'b': 10}\nk = iter(['a', 'b'])\nd[next(k)] += 1\n__result__ = d",
        {"a": 2, "b": 10},
    ),
    (
        "fresh-control-exception-chain",
        "try:\n    try:\n        {}['k']\n    except KeyError as e:\n"
        "        raise ValueError('v') from e\nexcept ValueError as e:\n    __result__ = [str(e), repr(e), e.args]",
        ["v", "ValueError('v')", ["v"]],
    ),
    (
        "fresh-control-try-else-finally",
        "out = []\ntry:\n    out.append(1)\nexcept Exception:\n    out.append(2)\n"
        "else:\n    out.append(3)\nfinally:\n    out.append(4)\n__result__ = out",
        [1, 3, 4],
    ),
    (
        "fresh-control-recursion-caught",
        "def f(n):\n    return f(n + 1)\ntry:\n    f(0)\nexcept RecursionError:\n    __result__ = 'deep'",
        "deep",
    ),
    ("fresh-control-long-sum", "def f(x):\n    return " + " + ".join(["x"] * 60) + "\n__result__ = f(1)", 60),
    (
        "fresh-control-kwargs-own-private",
        "def f(**kw):\n    return sorted(kw)\n__result__ = f(**{'_x': 1, 'y': 2})",
        ["_x", "y"],
    ),
    (
        "fresh-control-rebound-builtins",
        "type = lambda v: 'mine'\nstr = lambda v: 'text'\n__result__ = [type(1), str(2), 'a'.upper()]",
        ["mine", "text", "A"],
    ),
    ("fresh-control-percent-decimal", "__result__ = '%s|%.1f' % (decimal.Decimal('1.5'), 2.25)", "1.5|2.2"),
    (
        "fresh-control-big-int-ops",
        "x = 1 << 500_000\n__result__ = [(x * x).bit_length(), divmod(x, 3)[1]]",
        [1_000_001, 1],
    ),
]
