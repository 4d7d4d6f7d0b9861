"""TAM (SPEC §8, seed 003): ``<|[REQUEST_TOOL]|>`` blocks, parsed and translated into a sandbox program.

    <|[REQUEST_TOOL]|>
    command1:「始」write_file「末」
    path1:「始」notes.md「末」
    content1:「始」first line
    second line「末」
    command2:「始」read_file「末」
    path2:「始」notes.md「末」
    <|[END_TOOL]|>

The package reads in the direction the data flows: `grammar` (markers, `parse_tam`, `looks_like_tam`,
positions and `TamError`), `coerce` (a verbatim value to its parameter's type) and `program` (tool ids,
validation, `translate_tam` and the emitted `TamProgram`).
"""

from attp_server.run.tam.coerce import CoercionError, coerce_value
from attp_server.run.tam.grammar import END_MARKER, START_MARKER, VALUE_CLOSE, TamError, looks_like_tam, parse_tam
from attp_server.run.tam.program import TamProgram, tam_program, translate_tam

__all__ = [
    "END_MARKER",
    "START_MARKER",
    "VALUE_CLOSE",
    "CoercionError",
    "TamError",
    "TamProgram",
    "coerce_value",
    "looks_like_tam",
    "parse_tam",
    "tam_program",
    "translate_tam",
]
