"""Resource limits every loader honours."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.model import FileRejected


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
