"""Whether a DOCX run is hidden from a reader, from its effective formatting.

Word applies a run's direct formatting first, then its character style and the styles that one is
based on, then its paragraph's style chain. Text hidden anywhere in that chain (``w:vanish``), coloured
white, or set in type too small to read is not what a reader sees, so it is dropped and flags its
section like direct ``w:vanish`` (an outside review, round 3, hid instructions through a hidden
character style, a hidden paragraph style, white text and 1-point text; only direct ``w:vanish`` was
seen). A page colour other than white is not looked at: white text on it would be dropped too, which
errs towards dropping, as the HTML loader does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_MAX_STYLE_DEPTH = 32  # based-on chains are short; one that loops in a hostile file must still end
_UNREADABLE_PT = 2.0  # at or below this size (points) text cannot be read on a page
_WHITE = "FFFFFF"


class HiddenRuns:
    """Resolves runs of one document; caches each style's answer by its id."""

    def __init__(self) -> None:
        self._styles: dict[tuple[str, str], bool | None] = {}

    def hidden(self, run: Any, para: Any) -> bool:
        for what, test in _TESTS.items():
            # Direct formatting first, then the character style's chain, then the paragraph style's.
            answer = test(run.font)
            if answer is None:
                answer = self._style_chain(_char_style(run), what, test)
            if answer is None:
                answer = self._style_chain(para.style, what, test)
            if answer:
                return True
        return False

    def _style_chain(self, style: Any, what: str, test: Callable[[Any], bool | None]) -> bool | None:
        """The first answer along ``style``'s based-on chain; None if no style there says."""
        if style is None:
            return None
        key = (what, str(style.style_id))
        if key in self._styles:
            return self._styles[key]
        found: bool | None = None
        for _ in range(_MAX_STYLE_DEPTH):
            if style is None:
                break
            found = test(style.font)
            if found is not None:
                break
            style = style.base_style
        self._styles[key] = found
        return found


def _char_style(run: Any) -> Any:
    # A run without a character style of its own reports the default one, which says nothing.
    return run.style if run._r.style is not None else None


def _vanish(font: Any) -> bool | None:
    hidden: bool | None = font.hidden
    return hidden


def _white(font: Any) -> bool | None:
    colour = font.color
    if colour is None or colour.type is None:
        return None
    rgb = colour.rgb
    return None if rgb is None else str(rgb).upper() == _WHITE


def _unreadable(font: Any) -> bool | None:
    size = font.size
    return None if size is None else bool(size.pt <= _UNREADABLE_PT)


_TESTS: dict[str, Callable[[Any], bool | None]] = {"vanish": _vanish, "white": _white, "size": _unreadable}
