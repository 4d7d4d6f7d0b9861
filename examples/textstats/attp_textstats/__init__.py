"""Text statistics for attp-server: an example of a complete third-party toolpack."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from attp_server import ToolError, Toolpack, ToolpackContext

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


class TextstatsOptions(BaseModel):
    """Options, from ATTP_TEXTSTATS__<OPTION> or the config file's [toolpacks.textstats] table."""

    model_config = ConfigDict(extra="forbid")

    min_length: int = Field(1, ge=1, description="Ignore words shorter than this.")


def _words(text: str, min_length: int) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if len(w) >= min_length]


def _build(context: ToolpackContext) -> list[Callable[..., Any]]:
    options = context.options if isinstance(context.options, TextstatsOptions) else TextstatsOptions()

    def word_count(text: str) -> dict[str, int]:
        """Count the characters, words and lines of a text.

        Args:
            text: The text to measure.

        Returns:
            {"characters": int, "words": int, "lines": int}; words shorter than the pack's
            min_length option are not counted.

        Example:
            >>> word_count("one two\\nthree")
            {"characters": 13, "words": 3, "lines": 2}
        """
        return {
            "characters": len(text),
            "words": len(_words(text, options.min_length)),
            "lines": len(text.splitlines()),
        }

    def top_words(text: str, n: int = 10) -> list[dict[str, Any]]:
        """Return the n most frequent words of a text, most frequent first.

        Args:
            text: The text to analyse.
            n: How many words to return (1 to 1000).

        Returns:
            A list of {"word": str, "count": int}, ties in order of first appearance.

        Raises:
            ToolError: INVALID_N when n is outside 1..1000.

        Example:
            >>> top_words("a b a", n=1)
            [{"word": "a", "count": 2}]
        """
        if not 1 <= n <= 1000:
            raise ToolError(
                "INVALID_N", f"n must be between 1 and 1000, not {n}", parameter_name="n", suggested_value="10"
            )
        counts = Counter(_words(text, options.min_length))
        return [{"word": word, "count": count} for word, count in counts.most_common(n)]

    return [word_count, top_words]


toolpack = Toolpack(
    name="textstats",
    description="Word counts and frequent words of a text.",
    build=_build,
    options=TextstatsOptions,
    read_only=True,
)
