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

* from a fence that opens a code block until the fence that closes it, up to
  ``CODE_HOLD`` characters, so a block goes out whole, as code.

A ``<`` or ``(`` holds nothing beyond its word: raw HTML is dropped or shown as
text either way. A word longer than ``WORD_HOLD`` (no whitespace at all) is
dropped whole, since half of a URL must never be released.

Code is the one raw content of the output (an indented block), and it is code only where a
renderer reads it at the top level: after a paragraph line it would continue the paragraph,
inside an earlier piece's list item or quote it would be that item's text, and render as
markdown. So a piece holding code goes out after a blank line and a line that closes any list
or quote (``BREAK``: an invisible paragraph at the left margin, which ends them in every
renderer, as in ``sanitize``).
"""

from __future__ import annotations

import re

from docquery.rag.sanitize import BREAK, CODE_INDENT, TEXT_REMOVED, Sanitizer

# Indentation and container markers (quotes, list items), one unambiguous step at a time: linear, where a
# nested repetition of optional parts backtracks exponentially on a deep quote that holds no fence.
_LINE_PREFIX = re.compile(r"(?:[ \t>]|(?:[-+*]|[0-9]{1,9}[.)])(?=[ \t]))*")
# A line that opens or closes a fence: after any container markers, three or more backticks or tildes.
_FENCE_LINE = re.compile(r"^" + _LINE_PREFIX.pattern + r"(`{3,}|~{3,})", re.M)


class StreamSanitizer:
    """Call ``feed`` per delta and ``flush`` at the end; both return text ready to send."""

    LINK_HOLD = 256
    WORD_HOLD = 256
    CODE_HOLD = 4096

    def __init__(self, sanitizer: Sanitizer) -> None:
        self._sanitizer = sanitizer
        self._pending = ""
        self._dropping_word = False
        self._line_start = True
        self._sent: list[str] = []

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
        cut = _keep_indentation(pending, min(cut, self._before_open_fence(pending)))
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

    def _before_open_fence(self, pending: str) -> int:
        """Where a fence that is still open starts (its line), or past the end: nothing to hold."""
        opened: tuple[str, int] | None = None
        for m in _FENCE_LINE.finditer(pending):
            run = m.group(1)
            if opened is None:
                opened = (run, m.start())
            elif run[0] == opened[0][0] and len(run) >= len(opened[0]):
                opened = None
        if opened is None or len(pending) - opened[1] > self.CODE_HOLD:
            return len(pending)
        return opened[1]

    def _release(self, text: str) -> str:
        midline = not self._line_start
        out = self._sanitizer.render(text, at_line_start=self._line_start)
        if self._sent and ("\n" + CODE_INDENT in out or out.startswith(CODE_INDENT)):
            out = self._seated(out, midline)
        return self._emit(out)

    def _seated(self, out: str, midline: bool) -> str:
        """``out``, which holds code, placed where its code is read at the top level."""
        head, rest = "", out
        if midline:  # the piece's first block is the paragraph of the line it continues: it stays there
            first, sep, after = out.partition("\n\n")
            if not sep:
                return out
            head, rest = first, after
        before = "".join(self._sent) + head
        rest = rest.lstrip("\n")
        blank = "" if before.endswith("\n\n") else "\n" if before.endswith("\n") else "\n\n"
        # Renderers disagree on where an earlier list or quote ends (a lazy line, text passed through
        # unparsed), so the code is always preceded by a line that ends them all.
        return head + blank + BREAK + "\n\n" + rest

    def _emit(self, out: str) -> str:
        if out:
            self._line_start = out.endswith("\n")
            self._sent.append(out)
        return out


def _keep_indentation(text: str, cut: int) -> int:
    """``cut``, moved back to the start of its line when only indentation and container markers precede
    it there: they go out with the line's text (together they decide whether it is a fence, or code)."""
    line = text.rfind("\n", 0, cut) + 1
    return line if line < cut and _LINE_PREFIX.fullmatch(text, line, cut) else cut


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
