"""The sanitiser applied to a token stream: release at once what can no longer become a link.

Each released piece is sanitised on its own (``Sanitizer.render``); its output
is closed, so pieces cannot form a construct across the seam. What is held back:

* the word being written (text after the last whitespace or non-ASCII
  character): a URL, e-mail address, entity or autolink is one word, and must
  be sanitised whole;
* when links to some hosts are allowed: from an unclosed ``[`` (or ``![``) on,
  so an allowlisted link arrives whole and keeps working; past ``LINK_HOLD``
  characters the bracket is given up on and released as text, which is safe
  (it is escaped), only not a link. With an empty allowlist nothing is held
  for a bracket: no link could survive anyway.

A ``<`` or ``(`` holds nothing beyond its word: raw HTML is dropped or shown as
text either way. A word longer than ``WORD_HOLD`` (no whitespace at all) is
dropped whole, since half of a URL must never be released.
"""

from __future__ import annotations

from docquery.rag.sanitize import TEXT_REMOVED, Sanitizer


class StreamSanitizer:
    """Call ``feed`` per delta and ``flush`` at the end; both return text ready to send."""

    LINK_HOLD = 256
    WORD_HOLD = 256

    def __init__(self, sanitizer: Sanitizer) -> None:
        self._sanitizer = sanitizer
        self._pending = ""
        self._dropping_word = False
        self._line_start = True

    def feed(self, delta: str) -> str:
        if self._dropping_word:
            rest = _after_word(delta)
            if rest is None:
                return ""
            delta = rest
            self._dropping_word = False
        self._pending += delta
        pending = self._pending
        # With no allowlist no link can survive, so a bracket is never worth waiting for.
        if self._sanitizer.allow:
            cut, hold = _link_safe_cut(pending, max(0, len(pending) - self.LINK_HOLD))
        else:
            cut, hold = _last_cut_before(pending, len(pending)), None
        if cut == 0:
            if hold is None and len(pending) > self.WORD_HOLD and not _last_cut_before(pending, len(pending)):
                self._pending = ""
                self._dropping_word = True
                return self._emit(TEXT_REMOVED)
            return ""
        ready, self._pending = pending[:cut], pending[cut:]
        return self._release(ready)

    def flush(self) -> str:
        ready, self._pending = self._pending, ""
        self._dropping_word = False
        return self._release(ready) if ready else ""

    def _release(self, text: str) -> str:
        return self._emit(self._sanitizer.render(text, at_line_start=self._line_start))

    def _emit(self, out: str) -> str:
        if out:
            self._line_start = out.endswith("\n")
        return out


def _after_word(delta: str) -> str | None:
    for i, ch in enumerate(delta):
        if ch.isspace() or ord(ch) > 127:
            return delta[i:]
    return None


def _last_cut_before(text: str, limit: int) -> int:
    """Index just after the last whitespace or non-ASCII character in ``text[:limit]`` (0: none).

    Either ends anything that must be sanitised whole: e-mail addresses, entities and
    URL schemes are ASCII, and a URL host cut after a non-ASCII character is not allowlisted
    (``safe_url``), so the piece before the cut cannot keep a link the next piece extends.
    Cutting after non-ASCII characters lets text without spaces (Chinese, Japanese) stream.
    """
    for i in range(limit - 1, -1, -1):
        ch = text[i]
        if ch.isspace() or ord(ch) > 127:
            return i + 1
    return 0


def _link_safe_cut(text: str, start: int) -> tuple[int, int | None]:
    """The cut for ``text`` that splits no link: not inside a complete ``[...](...)``, and
    before the first one that could still be completed (whose start is also returned).
    Brackets before ``start`` are not looked at: past the hold bound they are text."""
    spans: list[tuple[int, int]] = []
    i, n = start, len(text)
    open_at: int | None = None
    while i < n and open_at is None:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch != "[":
            i += 1
            continue
        end = _match(text, i, "[", "]")
        if end is None or end + 1 >= n:
            open_at = i
            break
        nxt = text[end + 1]
        if nxt in "([":
            close = _match(text, end + 1, nxt, ")" if nxt == "(" else "]")
            if close is None:
                open_at = i
                break
            spans.append((i, close + 1))
            i = close + 1
        else:
            i = end + 1
    limit = n if open_at is None else open_at
    cut = _last_cut_before(text, limit)
    for first, last in reversed(spans):
        if first < cut <= last:
            cut = _last_cut_before(text, first)
    return cut, open_at


def _match(text: str, i: int, opener: str, closer: str) -> int | None:
    depth = 0
    j, n = i, len(text)
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return None
