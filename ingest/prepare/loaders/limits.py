"""Resource limits every loader honours."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ingest.model import FileRejected

# A heading, and a document title, are cut to this many characters.
MAX_HEADING_CHARS = 200
# A section's heading path (``Policy > Travel > Meals``), stored in every chunk of the section, is cut to
# this many: headings nest without bound in some formats (DOCX styles "Heading 1" to "Heading 3000"), and an
# uncut path is copied into every chunk (one 2.7 MB Markdown heading over 1,500
# paragraphs made a 503 MB collection).
MAX_PAGE_CHARS = 1024


def heading_path(titles: Iterable[str]) -> str | None:
    """The section's location as its headings joined, each and the whole cut to their limits; None if none."""
    out: list[str] = []
    size = 0
    for title in titles:
        part = title[:MAX_HEADING_CHARS]
        size += len(part) + (3 if out else 0)
        out.append(part)
        if size >= MAX_PAGE_CHARS:
            break
    joined = " > ".join(out)
    if len(joined) > MAX_PAGE_CHARS:
        joined = joined[: MAX_PAGE_CHARS - 1] + "…"
    return joined or None


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int
    max_expanded_bytes: int  # docx: sum of zip members; pdf: extracted text
    max_zip_members: int = 10_000


class TextBudget:
    """Counts extracted characters so a small file cannot expand without bound."""

    def __init__(self, limit: int, what: str) -> None:
        self._left = limit
        self._limit = limit
        self._what = what

    def take(self, text: str) -> str:
        self._left -= len(text)
        if self._left < 0:
            raise FileRejected(f"{self._what} expands past the limit of {self._limit} bytes")
        return text
