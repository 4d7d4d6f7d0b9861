"""The pictures a program shows: ``show(fig)`` (and ``plt.show()``), and the figures it leaves open, as PNG.

Each picture is drawn in the worker (matplotlib's Agg backend; its fonts were loaded before the walls closed)
and travels to the server as base64 PNG bytes; the server checks them and the client gets each as MCP image
content after the text. Together they are bounded by the run's ``max_result_bytes`` and `MAX_PICTURES`; what
does not fit is named in the hint, never silently lost.

Runs in the worker. Imports nothing above `attp_server.sandbox`.
"""

from __future__ import annotations

import base64
import io
import sys
from typing import Any

MAX_PICTURES = 10
"""Most pictures one run returns."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Pictures:
    """One run's pictures, in the order shown."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.images: list[dict[str, str]] = []
        self.size = 0
        self.left_out: list[str] = []

    def show(self, picture: Any = None, **_: Any) -> None:
        """Return a picture with the result: a matplotlib figure or axes, a PIL image, or PNG bytes; without an
        argument, every open figure. A figure shown is closed (it is not returned again at the end).

        Example:
            fig, ax = plt.subplots()
            ax.bar(totals.index, totals.values)
            show(fig)
        """
        if picture is None:
            self._open_figures()
            return
        figure = _figure_of(picture)
        if figure is not None:
            self._figure(figure)
            return
        if isinstance(picture, bytes | bytearray) and bytes(picture[:8]) == PNG_SIGNATURE:
            self._add(bytes(picture), "a PNG image")
            return
        if _is_pil_image(picture):
            buffer = io.BytesIO()
            picture.save(buffer, format="PNG")
            self._add(buffer.getvalue(), "an image")
            return
        raise TypeError(
            f"show() takes a matplotlib figure or axes, a PIL image or PNG bytes, not {type(picture).__name__}"
        )

    def finish(self) -> list[dict[str, str]]:
        """The pictures of the run: those shown, then the figures still open."""
        self._open_figures()
        return self.images

    def hint(self) -> str | None:
        if not self.left_out:
            return None
        names = "; ".join(self.left_out[:5]) + (
            f"; and {len(self.left_out) - 5} more" if len(self.left_out) > 5 else ""
        )
        return (
            f"Not returned: {names}. Show fewer or smaller pictures (plt.close(fig) when done with one), or save "
            'them with fig.savefig("chart.png")'
        )

    def _open_figures(self) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        for number in pyplot.get_fignums():
            self._figure(pyplot.figure(number))

    def _figure(self, figure: Any) -> None:
        label = f"figure {getattr(figure, 'number', None) or len(self.images) + 1}"
        if len(self.images) >= MAX_PICTURES:
            self.left_out.append(f"{label} (at most {MAX_PICTURES} pictures a run)")
        else:
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", bbox_inches="tight")
            self._add(buffer.getvalue(), label)
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close(figure)

    def _add(self, data: bytes, label: str) -> None:
        if len(self.images) >= MAX_PICTURES:
            self.left_out.append(f"{label} (at most {MAX_PICTURES} pictures a run)")
            return
        if self.size + len(data) > self.max_bytes:
            self.left_out.append(f"{label} ({len(data):,} bytes of PNG; max_result_bytes = {self.max_bytes:,} in all)")
            return
        self.size += len(data)
        self.images.append({"mime_type": "image/png", "data": base64.b64encode(data).decode("ascii")})


def _figure_of(picture: Any) -> Any:
    """The matplotlib figure `picture` is or belongs to (an axes, an array of axes), or None."""
    figure_type = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    if figure_type is None:
        return None
    if isinstance(picture, figure_type):
        return picture
    owner = getattr(picture, "figure", None)
    if isinstance(owner, figure_type):
        return owner
    flat = getattr(picture, "flat", None)
    if flat is not None:
        for item in flat:
            return _figure_of(item)
    return None


def _is_pil_image(picture: Any) -> bool:
    image = sys.modules.get("PIL.Image")
    return image is not None and isinstance(picture, image.Image)
