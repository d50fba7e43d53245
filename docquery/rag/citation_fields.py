"""Citation and listing fields that come from a document (title, source, page): plain text.

JSON carries them as the document wrote them, on one line and at most ``LABEL_CHARS`` long,
never backslash-escaped: a client shows them as text (a page ``sys.argv[i]`` read ``\\[i\\]``).
Where they are put into Markdown (the chat facade's sources footer) ``markdown_field`` escapes
them at that point with the output sanitiser's rules, so that Markdown stays inert.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from docquery.core.domain import Citation
from docquery.rag.sanitize import LABEL_CHARS, Sanitizer, unlink_domains

# Line breaks and control characters (a terminal obeys them) become spaces.
_FLATTEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# Bidirectional overrides and marks reorder what a terminal or a page shows around them.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain_field(text: str) -> str:
    """``text`` as one line of plain text: controls and line breaks are spaces, runs of spaces one."""
    flat = " ".join(_FLATTEN.sub(" ", _BIDI.sub("", text)).split())
    return flat if len(flat) <= LABEL_CHARS else flat[: LABEL_CHARS - 1] + "…"


def markdown_field(text: str, sanitizer: Sanitizer) -> str:
    """A plain field put into Markdown: escaped there, so it renders as the text it is, and no linkify
    renderer makes a link of it (``vac.md`` is a domain)."""
    return unlink_domains(sanitizer.label(plain_field(text)))


def sources_markdown(citations: Sequence[Citation], sanitizer: Sanitizer) -> str:
    """The citations as a Markdown "Sources:" list for chat UIs ("" for none)."""
    if not citations:
        return ""
    lines = [
        f"[{c.id}] {markdown_field(c.title or c.source, sanitizer)} ({markdown_field(c.source, sanitizer)})"
        for c in citations
    ]
    return "\n\nSources:\n" + "\n".join(lines)
