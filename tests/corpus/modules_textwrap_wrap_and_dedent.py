# expect: ok
# needs: imports
import textwrap

para = "Models write short programs that call tools in a loop, and the server runs them safely in a sandbox."
__result__ = {
    "wrapped": textwrap.wrap(para, width=30),
    "dedented": textwrap.dedent("""
        first
          second
    """).strip("\n"),
    "short": textwrap.shorten(para, width=40, placeholder="..."),
}
