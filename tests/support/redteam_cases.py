"""Red-team cases: each is a hostile program and what would count as its escape.

Placeholders in a program: {CANARY} is a directory outside the workspace holding ``secret.txt``;
{PORT} is a loopback TCP port where a canary listener records every connection. Every case is also
checked against the suite's shared detectors (files created outside the workspace, secrets in the
result or output, canary connections, server state, the server's stdout, hangs); `escape` says what
that particular attack is after. `expect` lists the acceptable error codes when a refusal is the
only right answer (None: any clean outcome without an escape).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    code: str
    escape: str
    expect: frozenset[str] | None = None


REFUSED = frozenset({"FORBIDDEN", "RUNTIME_ERROR", "NAME_NOT_FOUND", "IMPORT_FORBIDDEN", "SYNTAX_ERROR"})
LIMITED = frozenset({"TIMEOUT", "MEMORY_LIMIT", "RESULT_TOO_LARGE", "TOOL_CALL_LIMIT", "RUNTIME_ERROR"})


def c(id: str, code: str, escape: str, expect: frozenset[str] | None = REFUSED) -> Case:
    return Case(id, code, escape, expect)


DUNDER = [
    c("dunder-class-bases-subclasses", "().__class__.__bases__[0].__subclasses__()", "reach object.__subclasses__"),
    c("dunder-mro", "''.__class__.__mro__[-1]", "reach object through the MRO"),
    c("dunder-globals-of-lambda", "(lambda: 0).__globals__", "reach the evaluator's globals"),
    c("dunder-code", "(lambda: 0).__code__", "reach a code object"),
    c("dunder-builtins-name", "__builtins__", "reach builtins by name"),
    c("dunder-import-name", "__import__('os')", "import via __import__"),
    c("dunder-dict-of-namespace", "math.__dict__", "reach the namespace's internals"),
    c("dunder-reduce-ex", "(1).__reduce_ex__(2)", "reach copyreg internals"),
    c("dunder-init-globals", "[].__init__.__globals__", "reach globals through a slot wrapper"),
    c("dunder-doc-of-tool", "read_file.__doc__", "reach the tool's real function"),
    c("dunder-name-via-format-spec", "f'{().__class__}'", "dunder inside an f-string"),
    c("dunder-getattribute", "'a'.__getattribute__('__class__')", "reflection via __getattribute__"),
]

NAMESPACES = [
    c("smolagents-CVE-2025-5120-json-codecs", "json.codecs.builtins", "a whitelisted module's imports"),
    c("namespace-re-enum", "re.enum.sys", "reach sys through re's imports"),
    c("namespace-re-sre-compile", "re._compiler", "private module of re"),
    c("namespace-statistics-sys", "statistics.sys.modules", "reach sys.modules"),
    c("namespace-statistics-random", "statistics.random._os", "reach os via statistics' random"),
    c("namespace-math-via-dict", "math.members['sqrt']", "read the namespace's member table"),
    c("namespace-random-os", "random._os.system('id')", "run a command via random's os"),
    c("namespace-random-inst", "random._inst", "reach the shared global generator"),
    c("namespace-datetime-sys", "datetime.sys", "reach sys through datetime"),
    c("namespace-datetime-class-module", "datetime.datetime.__module__", "module name of a class"),
    c("namespace-tzinfo-type", "datetime.timezone.utc.tzname.__self__", "bound method self"),
    c("namespace-json-decoder-class", "json.JSONDecoder", "construct a decoder with hooks"),
    c("namespace-json-scanner", "json.scanner", "reach json's C scanner"),
    c("simpleeval-CVE-2026-32640-module-names", "math.__loader__", "module loader passed as a name"),
    c("namespace-statistics-fractions", "statistics.Fraction", "reach fractions module classes"),
    c("namespace-re-copyreg", "re.copyreg", "reach copyreg"),
    c("namespace-help-overview", "help().__class__", "object behind help()"),
]

FORMATTING = [
    c("asteval-CVE-2025-24359-format-spec", "'{0.__class__.__init__.__globals__}'.format(1)", "format field traversal"),
    c("RestrictedPython-CVE-2023-41039-format-map", "'{x.__class__}'.format_map({'x': 1})", "format_map traversal"),
    c("format-index-then-dunder", "'{0[0].__class__}'.format([1])", "index then dunder in a field"),
    c("format-unbound-str-format", "str.format('{0.__class__}', 1)", "unbound str.format skips the wrapper"),
    c("format-width-bomb", "'{:>1000000000}'.format(1)", "huge width", LIMITED | REFUSED),
    c("format-nested-width-bomb", "'{:>{}}'.format(1, 10**9)", "nested huge width", LIMITED | REFUSED),
    c("fstring-width-bomb", "f'{1:>{10**9}}'", "huge f-string width", LIMITED | REFUSED),
    c("percent-star-width", "'%*s' % (10**9, 'x')", "'*' width in %-format", LIMITED | REFUSED),
    c("percent-width-bomb", "'%1000000000d' % 1", "huge %-format width", LIMITED | REFUSED),
    c("format-builtin-spec-bomb", "format(1, '>1000000000')", "huge width via format()", LIMITED | REFUSED),
    c("format-attribute-of-namespace", "'{0.sqrt.__self__}'.format(math)", "namespace member's module"),
    c("format-conversion-repr-of-tool", "'{0!r}'.format(read_file)", "repr of a stub reveals internals", None),
]

FRAMES = [
    c("RestrictedPython-CVE-2023-37271-generator-frame", "(x for x in [1]).gi_frame", "a generator's frame"),
    c("generator-frame-back", "g = (x for x in [1])\ng.gi_frame.f_back.f_globals", "walk frames up"),
    c("generator-yield-function", "def g():\n    yield 1\ng().gi_frame", "define a generator"),
    c("coroutine-async-def", "async def f():\n    pass\nf().cr_frame", "coroutine frame"),
    c("iterator-setstate", "it = iter([1, 2])\nit.__setstate__(0)", "iterator internals"),
    c("map-object-attributes", "map(str, [1]).__reduce__()", "reduce a map object"),
]

EXCEPTIONS = [
    c(
        "RestrictedPython-CVE-2024-47532-attributeerror-obj",
        "try:\n    (1).nope\nexcept AttributeError as e:\n    __result__ = e.obj",
        "AttributeError.obj",
    ),
    c("exception-traceback", "try:\n    1/0\nexcept Exception as e:\n    __result__ = e.__traceback__", "a traceback"),
    c("exception-context", "try:\n    1/0\nexcept Exception as e:\n    __result__ = e.__context__", "chained context"),
    c(
        "exception-with-traceback-method",
        "try:\n    1/0\nexcept Exception as e:\n    e.with_traceback(None)",
        "exception methods",
    ),
    c(
        "exception-name-attr",
        "try:\n    undefined_name\nexcept NameError as e:\n    __result__ = e.name",
        "NameError.name",
        None,
    ),
    c(
        "exception-args-of-tool-error",
        "try:\n    read_file('/etc/passwd')\nexcept ToolError as e:\n    __result__ = [e.code, e.args]",
        "ToolError carries only data",
        None,
    ),
    c("exception-class-subclasses", "ToolError.__subclasses__()", "exception class internals"),
    c("exception-raise-baseexception", "raise SystemExit(0)", "escape via SystemExit"),
    c("asteval-CVE-2026-55244-keyboardinterrupt", "raise KeyboardInterrupt", "BaseException escapes eval"),
    c("exception-raise-generatorexit", "raise GeneratorExit", "GeneratorExit escapes"),
    c("exception-raise-non-exception", "raise 5", "raising a non-exception", REFUSED | {"RUNTIME_ERROR"}),
    c(
        "exception-except-baseexception-catches-timeout",
        "try:\n    while True:\n        pass\nexcept BaseException:\n    __result__ = 'caught'",
        "catch the deadline",
        REFUSED | {"TIMEOUT"},
    ),
    c(
        "exception-bare-except-catches-timeout",
        "try:\n    while True:\n        pass\nexcept:\n    __result__ = 'caught'",
        "catch the deadline",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "exception-finally-runs-after-timeout",
        "try:\n    while True:\n        pass\nfinally:\n    while True:\n        pass",
        "keep running in finally",
        frozenset({"TIMEOUT"}),
    ),
]

TOOLS = [
    c("tool-stub-globals", "read_file.__call__.__globals__", "the stub's globals"),
    c("tool-stub-invoke", "read_file._invoke", "the stub's channel"),
    c("tool-stub-attributes", "read_file.name", "attributes of a stub"),
    c("tool-pack-members", "files.members", "the pack namespace's table"),
    c("tool-help-not-a-function", "help('read_file').__class__", "introspect help's result"),
    c("tool-read-outside-absolute", "read_file('{CANARY}/secret.txt')", "read a file outside the workspace", None),
    c("tool-read-outside-dotdot", "read_file('../canary/secret.txt')", "traverse out of the workspace", None),
    c("tool-write-outside", "write_file('../canary/pwned', 'x')", "create a file outside", None),
    c("tool-write-absolute", "write_file('{CANARY}/pwned', 'x')", "create a file by absolute path", None),
    c("tool-list-outside", "list_files('/')", "list the root", None),
    c(
        "tool-rich-values-flattened",
        "v = rich_values()\n__result__ = [type(v) is dict, v['path'].__class__]",
        "a Path enters the sandbox",
    ),
    c("tool-rich-values-methods", "rich_values()['path'].write_text('x')", "call a method of a returned Path"),
    c("tool-partial-leaks-credential", "callable_value()", "a partial carrying a credential", None),
    c("tool-async-coroutine-frame", "fetch_later('x').cr_frame", "an async tool's coroutine frame"),
    c("tool-async-returns-data", "__result__ = fetch_later('plain')", "async results are plain data", None),
    c("tool-credential-in-vault", "__result__ = vault_status()", "the vault credential", None),
    c("tool-argument-procedure", "read_file(lambda: 1)", "pass a function to a tool", None),
    c("tool-argument-namespace", "write_file('x.txt', math)", "pass a namespace to a tool", None),
    c("tool-kwargs-underscore", "read_file(**{'_path': 'x'})", "underscore keywords", None),
    c(
        "tool-call-flood",
        "for i in range(10000):\n    vault_status()",
        "exceed the tool budget",
        frozenset({"TOOL_CALL_LIMIT"}),
    ),
]

BUILTINS = [
    c("builtin-getattr", "getattr(1, '__class__')", "getattr"),
    c("builtin-type", "type(1)", "type"),
    c("builtin-type-3-args", "type('X', (), {})", "create a class"),
    c("builtin-vars", "vars()", "vars"),
    c("builtin-dir", "dir()", "dir"),
    c("builtin-globals", "globals()", "globals"),
    c("builtin-locals", "locals()", "locals"),
    c("builtin-eval", "eval('1')", "eval"),
    c("builtin-exec", "exec('x=1')", "exec"),
    c("builtin-compile", "compile('1', 'f', 'eval')", "compile"),
    c("builtin-open", "open('{CANARY}/secret.txt').read()", "open"),
    c("builtin-object", "object.__subclasses__()", "object"),
    c("builtin-setattr-shadowed", "setattr = 1\nsetattr", "a program's own name is fine", None),
    c("builtin-breakpoint", "breakpoint()", "debugger"),
    c("builtin-input", "input()", "read the server's stdin"),
    c("builtin-isinstance-type-probe", "isinstance(read_file, object)", "reach object via isinstance", None),
    c("builtin-iter-callable-sentinel", "next(iter(vault_status, None))", "iter with a sentinel", None),
    c("builtin-memoryview", "memoryview(b'x')", "memoryview"),
]

IMPORTS = [
    c("import-plain", "import os", "import", frozenset({"IMPORT_FORBIDDEN"})),
    c("import-from", "from os import system", "from-import", frozenset({"IMPORT_FORBIDDEN"})),
    c("import-as", "import subprocess as sp", "import as", frozenset({"IMPORT_FORBIDDEN"})),
    c("import-relative", "from . import x", "relative import", frozenset({"IMPORT_FORBIDDEN"})),
    c("import-whitelisted", "import json\n__result__ = json.codecs", "an imported module is the real one"),
    c("import-whitelisted-loader", "import json as j\nj.__loader__", "module internals through an import alias"),
    c(
        "import-from-module-internal",
        "from json import codecs",
        "a module's own imports",
        frozenset({"IMPORT_FORBIDDEN"}),
    ),
    c(
        "import-from-private-member",
        "from random import _inst",
        "the shared generator",
        frozenset({"IMPORT_FORBIDDEN"}),
    ),
    c(
        "import-from-sys-of-namespace",
        "from statistics import sys",
        "sys via a namespace",
        frozenset({"IMPORT_FORBIDDEN"}),
    ),
    c("import-star-then-internals", "from re import *\n__result__ = enum", "what a star import binds"),
    c("import-dotted-submodule", "import json.decoder", "a real submodule", frozenset({"IMPORT_FORBIDDEN"})),
    c("import-future-is-inert", "from __future__ import annotations\n__result__ = 1", "a compiler directive", None),
    c(
        "import-in-function",
        "def f():\n    import os\nf()",
        "import inside a function",
        frozenset({"IMPORT_FORBIDDEN"}),
    ),
    c("import-dunder-call", "__import__('os').system('id')", "__import__"),
    c("import-via-string-eval", "json.loads('\"import os\"')", "data is not code", None),
]

DEFINITIONS = [
    c("def-default-arg-capture", "def f(x=read_file):\n    return x\nf().__self__", "stub via default argument"),
    c("def-decorator", "@print\ndef f():\n    pass\n__result__ = 1", "a decorator sees only an opaque function", None),
    c(
        "def-decorator-reads-internals",
        "def d(fn):\n    return fn.code\n@d\ndef f():\n    pass",
        "a decorator walks the function",
    ),
    c("def-class", "class A:\n    pass", "class definitions"),
    c("def-lambda-globals", "f = lambda: 0\nf.__globals__", "lambda globals"),
    c("def-procedure-attrs", "def f():\n    pass\nf.name", "the function's own attributes"),
    c("def-procedure-interpreter", "def f():\n    pass\nf.__asteval__", "reach the interpreter"),
    c(
        "def-global-statement",
        "def f():\n    global print\n    print = 1\nf()\n__result__ = print",
        "a global rebinds only the run's own names",
        None,
    ),
    c("def-global-dunder", "def f():\n    global __builtins__\n    return __builtins__", "builtins through global"),
    c("def-nonlocal", "def f():\n    x = 1\n    def g():\n        nonlocal x\n    g()", "nonlocal", None),
    c(
        "def-nonlocal-unbound",
        "def f():\n    def g():\n        nonlocal symtable\n    g()\nf()",
        "nonlocal into the host",
    ),
    c("def-recursion-bomb", "def f(n):\n    return f(n + 1)\nf(0)", "blow the C stack", LIMITED),
    c("def-kwonly", "def f(*, a):\n    return a\n__result__ = f(a=1)", "keyword-only parameters", None),
    c("def-walrus-underscore", "(_x := 1)", "walrus into a private name", None),
    c("def-walrus-dunder", "(__x := 1)", "walrus into a dunder name"),
    c("def-comprehension-underscore", "[_ for _ in range(3)]", "underscore loop name", None),
    c("def-comprehension-dunder", "[__x for __x in range(3)]", "dunder loop name"),
]

# Closures: a function's captured cells hold only what the program itself defined, and nothing of a
# function, a cell or a generator expression leads back to the evaluator, its symbol table or other frames.
CLOSURES = [
    c("closure-dunder-closure", "def mk():\n    x = 1\n    return lambda: x\nmk().__closure__", "closure cells"),
    c(
        "closure-cell-contents-via-format",
        "def mk():\n    x = 1\n    return lambda: x\n'{0.__closure__[0].cell_contents}'.format(mk())",
        "cell contents through a format field",
    ),
    c("closure-slot-closure", "def mk():\n    x = 1\n    return lambda: x\nmk().closure", "the captured cells"),
    c("closure-slot-code", "f = lambda: 1\nf.code.budget", "the evaluator behind the code"),
    c("closure-slot-enter", "f = lambda: 1\nf.enter", "the call closure"),
    c("closure-slot-defaults", "def f(x=1):\n    return x\nf.defaults", "the defaults tuple"),
    c("closure-format-slot-chain", "f = lambda: 1\n'{0.code.body}'.format(f)", "compiled code through format"),
    c("closure-format-map-slot", "f = lambda: 1\n'{f.enter}'.format_map({'f': f})", "compiled code through format_map"),
    c(
        "closure-key-function-walk",
        "sorted([1, 2], key=lambda v: (lambda: v).closure)",
        "a key function walks a closure",
    ),
    c(
        "closure-repr-is-opaque",
        "def mk():\n    secret = 'x'\n    return lambda: secret\nf = mk()\n"
        "__result__ = [repr(f), str(f), f'{f!r}', '%r' % (f,), format(f)]",
        "a repr that shows cells, code or addresses",
        None,
    ),
    c("closure-json-dump", "f = lambda: 1\njson.dumps(f)", "serialize a function", REFUSED | {"RUNTIME_ERROR"}),
    c(
        "closure-as-result",
        "__result__ = lambda: 1",
        "a function as the result",
        frozenset({"RESULT_NOT_SERIALIZABLE"}),
    ),
    c(
        "closure-over-tool-stub",
        "def mk():\n    r = read_file\n    return lambda: r\nmk()().__self__",
        "a stub in a cell",
    ),
    c(
        "closure-traceback-frame",
        "def f():\n    return 1 / 0\ntry:\n    f()\nexcept Exception as e:\n    __result__ = e.__traceback__.tb_frame",
        "the frame of a function that raised",
    ),
    c("closure-generator-items", "g = (x for x in [1])\ng._items", "the generator behind a generator expression"),
    c("closure-generator-frame-format", "g = (x for x in [1])\n'{0._items.gi_frame}'.format(g)", "a generator frame"),
    c("closure-generator-repr", "__result__ = repr(x for x in [1])", "an address in a generator's repr", None),
    c(
        "closure-recursion-through-c",
        "def f(n):\n    return sorted([n], key=lambda v: f(v + 1))\nf(0)",
        "exhaust the C stack through key functions",
        LIMITED,
    ),
    c(
        "closure-timeout-in-key-function",
        "sorted(range(100), key=lambda v: [w for w in iter(int, 1)])",
        "a runaway inside a function called from C",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "closure-timeout-in-generator-uncatchable",
        "try:\n    list(x for x in iter(int, 1))\nexcept Exception:\n    __result__ = 'caught'",
        "catch the deadline inside a generator",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "closure-size-bomb-in-generator",
        "try:\n    sum(len('a' * 10**10) for x in [1])\nexcept Exception:\n    __result__ = 'caught'",
        "catch a size limit inside a generator",
        LIMITED,
    ),
    c("closure-decorator-functools-like", "def d(fn):\n    return fn.__wrapped__\n@d\ndef f():\n    pass", "wrapped"),
]

STATE = [
    c("state-namespace-setattr", "math.pi = 3", "overwrite a namespace member"),
    c("state-namespace-delattr", "del math.pi", "delete a namespace member"),
    c("state-builtin-class-attr", "str.upper = None", "patch a builtin class"),
    c("state-tool-stub-attr", "read_file.name = 'write_file'", "retarget a stub"),
    c(
        "state-shadow-then-next-run",
        "json = 'poisoned'\nprint = None\nread_file = None",
        "shadowing leaks to the next run",
        None,
    ),
    c("state-random-seed-global", "random.seed(0)\n__result__ = random.random()", "seed the server's generator", None),
    c("state-list-of-exceptions-mutation", "ValueError.args = 1", "patch an exception class"),
    c("state-dict-view-mapping", "{}.keys().mapping", "mappingproxy of a dict"),
]

NETWORK = [
    c("network-socket-name", "socket", "a socket module"),
    c("network-urllib-json", "json.loads.__module__", "module of a function"),
    c("network-tool-path-url", "read_file('http://127.0.0.1:{PORT}/')", "a URL as a path", None),
    c("network-list-files-unc", "list_files('//127.0.0.1/share')", "a UNC-like path", None),
]

EXHAUSTION = [
    c("cpu-infinite-loop", "while True:\n    pass", "hang the worker", frozenset({"TIMEOUT"})),
    c("cpu-regex-redos", "re.match('(a+)+$', 'a' * 40 + 'b')", "C-level hang", frozenset({"TIMEOUT"})),
    c("cpu-huge-sum", "sum(range(10**13))", "C-level loop", frozenset({"TIMEOUT"})),
    c("cpu-sorted-huge", "sorted(range(10**8), reverse=True)", "C-level sort", LIMITED),
    c("mem-str-mult", "'a' * 10**10", "memory bomb", LIMITED),
    c("mem-int-str-mult", "10**10 * 'a'", "int * str order", LIMITED),
    c("mem-list-mult", "[0] * 10**10", "list bomb", LIMITED),
    c("mem-nested-pow", "2 ** 2 ** 2 ** 2 ** 2", "nested power", LIMITED),
    c("mem-bytearray", "bytearray(10**10)", "bytearray bomb", LIMITED),
    c("mem-ljust", "'x'.ljust(10**10)", "ljust bomb", LIMITED),
    c("mem-join-sep", "('x' * 10**6).join(['a'] * 10**4)", "join separator bomb", LIMITED),
    c("mem-replace", "('a' * 10**6).replace('a', 'b' * 10**4)", "replace bomb", LIMITED),
    c("mem-factorial", "math.factorial(10**8)", "factorial", LIMITED),
    c("mem-comb", "math.comb(10**9, 10**8)", "comb", LIMITED),
    c("mem-str-of-huge-int", "str(10 ** 100000)", "str of a huge int", LIMITED),
    c("mem-lshift", "1 << 10**10", "left shift", LIMITED),
    c("mem-list-growth-loop", "x = []\nwhile True:\n    x.append('y' * 1000)", "grow until killed", LIMITED),
    c("mem-dict-comprehension", "{i: i for i in range(10**9)}", "huge dict", LIMITED),
    c("mem-expandtabs", "('\\t' * 10**5).expandtabs(10**5)", "expandtabs bomb", LIMITED),
    c("mem-randbytes", "random.randbytes(10**10)", "randbytes bomb", LIMITED),
    c("mem-to-bytes", "(1).to_bytes(10**10, 'big')", "to_bytes bomb", LIMITED),
    c(
        "issue12-bytearray-percent-width",
        '__result__ = len(bytearray(b"%9999999d") % 1)',
        "a format width past 10,000 through bytearray",
        LIMITED,
    ),
    c(
        "issue12-bytearray-join",
        '__result__ = len(b"".join([bytearray(5000000)] * 3))',
        "a join past 10 MB from bytearray items",
        LIMITED,
    ),
    c(
        "issue12-bytearray-re-sub",
        "__result__ = len(re.sub(b'', bytearray(5000), bytearray(5000)))",
        "a substitution past 10 MB with bytearray text",
        LIMITED,
    ),
    c("result-too-large", "__result__ = 'x' * 5_000_000", "giant result", frozenset({"RESULT_TOO_LARGE"})),
    c(
        "result-self-reference",
        "x = []\nx.append(x)\n__result__ = x",
        "cyclic result",
        frozenset({"RESULT_NOT_SERIALIZABLE"}),
    ),
    c("output-flood", "for i in range(100):\n    print('z' * 100000)\n__result__ = 1", "flood stdout", None),
]

STDOUT = [
    c(
        "stdout-forged-jsonrpc",
        'print(\'{"jsonrpc": "2.0", "id": 1, "result": {}}\')\n__result__ = 1',
        "forge a protocol message",
        None,
    ),
    c("stdout-print-file", "print('x', file=None)", "print to a file handle", None),
    c("stdout-print-file-object", "print('x', file=math)", "print to an object", REFUSED),
    c("stdout-result-newlines", '__result__ = \'\\n{"jsonrpc": "2.0"}\\n\'', "protocol text in the result", None),
]

# Regressions from the independent red-team review of this sandbox (findings F1-F8).
REVIEW = [
    c(
        "review-F1a-fnmatch-cache-growth",
        "for k in range(3):\n    list_files('.', pattern='a' * 1000000 + str(k))",
        "grow the server's fnmatch cache",
        frozenset({"INVALID_PATTERN"}),
    ),
    c(
        "review-F1b-unicode-class-pattern",
        "list_files('.', pattern='[\u0100-\uffff]' * 20000)",
        "minutes of regex compile in the server",
        frozenset({"INVALID_PATTERN"}),
    ),
    c(
        "review-F1c-realpath-quadratic",
        "read_file('a/' * 2000000 + 'b')",
        "quadratic realpath in the server",
        frozenset({"INVALID_PATH"}),
    ),
    c(
        "review-F1d-edit-quadratic",
        "write_file('big.txt', 'a' * 2000000)\nedit_file('big.txt', old_string='a', new_string='b')",
        "quadratic line counting in the server",
        frozenset({"OLD_STRING_NOT_UNIQUE"}),
    ),
    c(
        "review-F2-tools-query-flood",
        "q = 'a ' * 5000000\nfor i in range(100):\n    tools(q)",
        "stall the event loop",
        frozenset({"INVALID_ARGUMENT", "TOOL_CALL_LIMIT"}),
    ),
    c(
        "review-F2-meta-calls-unbounded",
        "while True:\n    help('x')",
        "unbounded calls trace",
        frozenset({"TOOL_CALL_LIMIT", "TIMEOUT"}),
    ),
    c(
        "review-F4-nested-lambda-compile",
        "x = " + "lambda: " * 1000 + "1",
        "RecursionError traceback from the check",
        frozenset({"SYNTAX_ERROR"}),
    ),
    c(
        "review-F5-huge-error-message",
        "s = 'x' * 10000000\nraise ValueError(f'{s}')",
        "uncapped error message",
        frozenset({"RUNTIME_ERROR", "MEMORY_LIMIT"}),
    ),
    c(
        "review-F7-int-message-crash",
        "raise ValueError(10 ** 5000)",
        "crash the worker's error path",
        frozenset({"RUNTIME_ERROR"}),
    ),
    c("review-F7-surrogate-print", "print('\\ud800')\n__result__ = 1", "crash the report encoder", None),
    c(
        "review-F7-surrogate-message",
        "raise ValueError('\\udcff')",
        "crash the report encoder",
        frozenset({"RUNTIME_ERROR"}),
    ),
    c(
        "review-F7-tool-error-non-json",
        "raise ToolError({'code': 'X', 'message': 'm', 'solution': lambda: 1})",
        "crash the report encoder",
        frozenset({"RUNTIME_ERROR"}),
    ),
    c(
        "review-F7-deep-tuple-hash",
        "t = ()\nfor i in range(1000000):\n    t = (t,)\nhash(t)",
        "segfault the worker",
        frozenset({"RUNTIME_ERROR", "TIMEOUT", "MEMORY_LIMIT"}),
    ),
    c(
        "review-F8-spoofed-timeout",
        "raise ToolError({'code': 'TIMEOUT', 'message': 'spoofed'})",
        "spoof a server-enforced code",
        frozenset({"RUNTIME_ERROR"}),
    ),
    c(
        "review-F8-surrogate-tool-argument",
        "try:\n    read_file('\\ud800')\nexcept Exception as e:\n    __result__ = e.args",
        "protocol frame in an exception",
        None,
    ),
    c(
        "review-F6-percent-nested-parens",
        "'%(a(b)c)99999999d' % {'a(b)c': 1}",
        "width hidden behind nested parentheses",
        LIMITED,
    ),
    c("review-F6-json-separators", "json.dumps([1] * 1000, separators=('x' * 100000, ':'))", "separator bomb", LIMITED),
    c("review-F6-re-sub-template", "re.sub('', 'x' * 10000, 'y' * 5000)", "substitution bomb", LIMITED),
    c("review-F6-translate", "('a' * 100000).translate({97: 'b' * 1000})", "translate bomb", LIMITED),
    c("review-F6-strftime", "datetime.now().strftime('%c' * 1000000)", "strftime bomb", LIMITED),
    c(
        "review-F6-fstring-doubling",
        "s = 'x' * 1000000\nfor i in range(20):\n    s = f'{s}{s}'",
        "f-string doubling",
        LIMITED,
    ),
]

PROBE_2026_11_24 = [
    c("probe-format-map-class", "'{a.real.__class__}'.format_map({'a': 1})", "dunder through format_map"),
    c(
        "probe-exc-traceback",
        "try:\n    1 / 0\nexcept Exception as e:\n    __result__ = e.__traceback__",
        "frames from a caught exception",
    ),
    c(
        "probe-exc-with-traceback",
        "try:\n    1 / 0\nexcept Exception as e:\n    __result__ = e.with_traceback",
        "a bound method of an exception",
    ),
    c(
        "probe-exc-cause",
        "try:\n    read_file('nope.txt')\nexcept Exception as e:\n    __result__ = e.__cause__",
        "the server-side cause of a tool error",
    ),
    c(
        "probe-toolerror-dict",
        "try:\n    read_file('nope.txt')\nexcept ToolError as e:\n    __result__ = e.__dict__",
        "a ToolError's internals",
    ),
    c("probe-generator-frame", "g = (x for x in [1])\ng.gi_frame", "a generator's frame"),
    c("probe-match-class", "re.match('a', 'a').re.__class__", "a pattern's class from a match"),
    c("probe-datetime-reduce", "datetime.datetime.now().__reduce__()", "pickling internals of a datetime"),
    c("probe-normaldist-dict", "statistics.NormalDist(0, 1).__dict__", "a statistics object's internals"),
    c("probe-json-decoder-class", "json.JSONDecoder", "the real json module's classes"),
    c("probe-json-object-hook", "json.loads('{}', object_hook=print)", "a callable hook into the real json"),
    c("probe-random-state", "random.getstate()", "the server's random state"),
    c("probe-key-reflection", "max([1, 2], key=lambda v: v.__class__)", "dunder inside a key function"),
    c("probe-fstring-nested-width", "w = 10 ** 9\nf'{1:{w}}'", "a width hidden in a nested spec", LIMITED),
    c("probe-int-to-text", "str(10 ** 100000)", "digits past the conversion limit", LIMITED),
    c(
        "probe-deep-result",
        "a = []\nfor i in range(100000):\n    a = [a]\n__result__ = a",
        "a result nested past the JSON encoder",
        None,
    ),
    c(
        "probe-deep-tool-argument",
        "a = []\nfor i in range(100000):\n    a = [a]\nwrite_file('x.txt', a)",
        "a tool argument nested past the protocol",
        None,
    ),
]

# A fresh pass over the new evaluator, imports and curated modules (what held is kept here as regression cases).
PROBE_EVALUATOR = [
    c(
        "evaluator-recursion-through-reduce",
        "def f(n):\n    return functools.reduce(lambda a, b: f(n + 1), [1, 2])\nf(0)",
        "exhaust the C stack through a curated module's callback",
        LIMITED,
    ),
    c(
        "evaluator-recursion-through-re-sub",
        "def f(n):\n    return re.sub('a', lambda m: f(n + 1), 'a')\nf(0)",
        "exhaust the C stack through a regex callback",
        LIMITED,
    ),
    c(
        "evaluator-recursion-through-defaultdict",
        "def f(n):\n    return collections.defaultdict(lambda: f(n + 1))['x']\nf(0)",
        "exhaust the C stack through a default factory",
        LIMITED,
    ),
    c(
        "evaluator-recursion-through-decorator",
        "def deco(fn):\n    return deco(fn)\n@deco\ndef g():\n    pass",
        "recursion while a def runs its decorator",
        LIMITED,
    ),
    c("evaluator-kwargs-dunder", "def f(**kw):\n    return kw\nf(**{'__class__': 1})", "a dunder keyword"),
    c("evaluator-star-import-internals", "from json import *\n__result__ = codecs", "a module's imports by star"),
    c(
        "evaluator-annotation-is-not-run",
        "def f(x: write_file('../canary/pwned', 'x')) -> write_file('{CANARY}/pwned', 'x'):\n    return x\n"
        "__result__ = f(1)",
        "a tool call hidden in an annotation",
        None,
    ),
    c("evaluator-setitem-on-namespace", "operator.setitem(math, 'pi', 3)", "rebind a module member"),
    c(
        "evaluator-unbound-format-through-partial",
        "functools.partial(str.format, '{0.__class__}')(1)",
        "the unwrapped str.format through a partial",
    ),
    c(
        "evaluator-endless-c-iterator-reduced",
        "functools.reduce(lambda a, b: a, iter(int, 1))",
        "an endless iterator drained by C code",
        frozenset({"TIMEOUT"}),
    ),
    c(
        "evaluator-factory-after-the-run",
        "def factory():\n    write_file('../canary/pwned', 'x')\n    return 0\n"
        "__result__ = collections.ChainMap(collections.defaultdict(factory), {'k': 1})",
        "program code run while the result is converted",
        None,
    ),
    c(
        "evaluator-parallel-huge-name",
        "parallel('x' * 1_000_000, [{}] * 40, return_errors=True)",
        "a result inflated by the calls trace",
        frozenset({"NAME_NOT_FOUND"}),
    ),
    c(
        "evaluator-modular-pow-in-c",
        "pow(2 ** 999_999, 2 ** 999_999, 2 ** 999_999 + 1)",
        "minutes of C-level arithmetic",
        frozenset({"TIMEOUT"}),
    ),
]

CASES: list[Case] = [
    *DUNDER, *NAMESPACES, *FORMATTING, *FRAMES, *EXCEPTIONS, *TOOLS, *BUILTINS, *IMPORTS, *DEFINITIONS,
    *CLOSURES, *STATE, *NETWORK, *EXHAUSTION, *STDOUT, *REVIEW, *PROBE_2026_11_24, *PROBE_EVALUATOR,
]  # fmt: skip

CONTROLS: list[tuple[str, str, object]] = [
    ("control-arithmetic", "__result__ = sum(i * i for i in range(100))", 328350),
    ("control-strings", "__result__ = ' '.join(w.capitalize() for w in 'hello big world'.split())", "Hello Big World"),
    ("control-format", "__result__ = '{:>6.2f}|{:<3}|{name}'.format(3.14159, 7, name='n')", "  3.14|7  |n"),
    ("control-json", "__result__ = json.loads(json.dumps({'a': [1, 2.5, None]}))", {"a": [1, 2.5, None]}),
    ("control-regex", "__result__ = re.sub(r'(\\d+)', lambda m: str(int(m.group(1)) * 2), 'a1b22')", "a2b44"),
    ("control-datetime", "__result__ = (datetime.date(2024, 3, 1) - datetime.date(2024, 2, 1)).days", 29),
    ("control-statistics", "__result__ = round(statistics.stdev([2, 4, 4, 4, 5, 5, 7, 9]), 3)", 2.138),
    (
        "control-tools-roundtrip",
        "write_file('n.txt', 'a\\nb')\n__result__ = read_file('n.txt').splitlines()",
        ["a", "b"],
    ),
    ("control-async-tool", "__result__ = fetch_later('ok', 0.01)", "ok"),
    ("control-rich-flattened", "__result__ = sorted(rich_values())", ["amount", "pair", "path", "tags", "when"]),
    (
        "control-exception-handling",
        "try:\n    read_file('nope.txt')\nexcept ToolError as e:\n    __result__ = e.code",
        "FILE_NOT_FOUND",
    ),
    ("control-functions", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n__result__ = fib(15)", 610),
    (
        "control-closures",
        "def make_adder(n):\n    return lambda x: x + n\nadd5 = make_adder(5)\n"
        "__result__ = [add5(1), re.sub(r'\\d', lambda m: str(add5(int(m.group()))), 'a1b2')]",
        [6, "a6b7"],
    ),
    (
        "control-imports-and-names",
        "import json\nfrom math import sqrt\nfirst, *rest = [4, 9, 16]\nfor _ in range(2):\n    pass\n"
        "__result__ = json.loads(json.dumps([sqrt(first), len(rest)]))",
        [2.0, 2],
    ),
    (
        "control-sorting",
        "rows = [{'n': 'b', 'v': 2}, {'n': 'a', 'v': 2}]\n"
        "__result__ = [r['n'] for r in sorted(rows, key=lambda r: (r['v'], r['n']))]",
        ["a", "b"],
    ),
    ("control-math", "__result__ = [math.gcd(12, 18), math.isqrt(99), math.factorial(5)]", [6, 9, 120]),
    (
        "control-random-private",
        "random.seed(7)\na = random.random()\nrandom.seed(7)\n__result__ = a == random.random()",
        True,
    ),
]
