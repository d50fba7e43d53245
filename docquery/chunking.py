"""Token-aware chunking with the embedder's own tokenizer: the chunker that ships.

Ingest chunks documents with it and the retrieval evaluation chunks its corpus with
it, with the same settings, so the published figures measure what ingest writes.

Sizes are counted in the model's tokens, so a chunk never overflows its window
(all-MiniLM-L6-v2: 256 tokens including [CLS]/[SEP]; the default 200 + 30
overlap leaves room). Cuts prefer a paragraph break, then a line break, then a
sentence end in the second half of the window. Chunk text is an exact slice of
the section text (token offsets map back to characters).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Span = tuple[int, int]


@dataclass(frozen=True)
class Section:
    """A run of document text with one location: a heading path (md, html, docx) or a page (pdf)."""

    text: str
    page: str | None = None
    flags: frozenset[str] = frozenset()


class Tokenizer(Protocol):
    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        """Character spans of each token of each text (no special tokens, no truncation)."""
        ...


class HFTokenizer:
    """Wraps a Hugging Face fast tokenizer (``LocalEmbedder.tokenizer``) or a ``tokenizers.Tokenizer``."""

    def __init__(self, hf_tokenizer: Any) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        backend = getattr(hf_tokenizer, "backend_tokenizer", hf_tokenizer)
        # A private copy: the bundled tokenizer.json pins truncation at 128, and the
        # embedder's own instance must not be reconfigured under it.
        self._tok = RustTokenizer.from_str(backend.to_str())
        self._tok.no_truncation()
        self._tok.no_padding()

    @classmethod
    def from_file(cls, path: str) -> HFTokenizer:
        from tokenizers import Tokenizer as RustTokenizer

        return cls(RustTokenizer.from_file(path))

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        encodings = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [enc.offsets for enc in encodings]  # already a fresh list of (int, int) per text


class RegexTokenizer:
    """Fallback for embedders without a local tokenizer: word pieces of at most 4 characters
    (conservative: real WordPiece/BPE tokens are usually longer, so chunks stay inside the window)."""

    _PIECE = re.compile(r"\w{1,4}|[^\w\s]")

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        return [[m.span() for m in self._PIECE.finditer(t)] for t in texts]


def tokenizer_for(embedder: object) -> Tokenizer:
    hf = getattr(embedder, "tokenizer", None)
    if hf is not None and (hasattr(hf, "backend_tokenizer") or hasattr(hf, "encode_batch")):
        return HFTokenizer(hf)
    return RegexTokenizer()


@dataclass(frozen=True)
class ChunkSpec:
    size: int = 200
    overlap: int = 30

    def __post_init__(self) -> None:
        if self.size < 16:
            raise ValueError("chunk size must be at least 16 tokens")
        if not 0 <= self.overlap < self.size // 2:
            raise ValueError("chunk overlap must be >= 0 and less than half the chunk size")

    @property
    def fingerprint(self) -> str:
        return f"{self.size}/{self.overlap}"


@dataclass(frozen=True)
class TextChunk:
    text: str
    page: str | None
    flags: frozenset[str]


_SENTENCE_END = (".", "!", "?", ";", ":")


def _cut(text: str, spans: list[Span], start: int, end: int, n: int) -> int:
    """Best end (exclusive token index) in the second half of [start, end)."""
    if end >= n:
        return n
    lo = start + (end - start) // 2
    best_line = best_sentence = -1
    for j in range(end, lo, -1):
        gap = text[spans[j - 1][1] : spans[j][0]]
        if "\n\n" in gap:
            return j
        if best_line < 0 and "\n" in gap:
            best_line = j
        if best_sentence < 0 and text[spans[j - 1][1] - 1 : spans[j - 1][1]] in _SENTENCE_END and gap:
            best_sentence = j
    if best_line > 0:
        return best_line
    return best_sentence if best_sentence > 0 else end


def split_text(text: str, spans: list[Span], spec: ChunkSpec) -> list[str]:
    n = len(spans)
    if n == 0:
        return []
    if n <= spec.size:
        return [text[spans[0][0] : spans[-1][1]]]
    out: list[str] = []
    start = 0
    while start < n:
        end = _cut(text, spans, start, min(start + spec.size, n), n)
        out.append(text[spans[start][0] : spans[end - 1][1]])
        if end >= n:
            break
        start = max(end - spec.overlap, start + 1)
    return out


def _spans_in_groups(tokenizer: Tokenizer, texts: list[str]) -> Iterator[list[Span]]:
    """Batch-tokenizes (fast), about one block's worth of text at a time, lazily."""
    group: list[str] = []
    size = 0
    for text in texts:
        if group and size + len(text) > BLOCK_CHARS:
            yield from tokenizer.spans(group)
            group, size = [], 0
        group.append(text)
        size += len(text)
    if group:
        yield from tokenizer.spans(group)


# Sections longer than this are tokenized in blocks (cut at a paragraph, line or word break), so a
# 50 MB text file never materialises tens of millions of token offsets at once.
BLOCK_CHARS = 100_000


def _blocks(section: Section) -> list[Section]:
    text = section.text
    if len(text) <= BLOCK_CHARS:
        return [section]
    out: list[Section] = []
    start = 0
    while start < len(text):
        end = min(start + BLOCK_CHARS, len(text))
        if end < len(text):
            floor = start + BLOCK_CHARS // 2
            for sep in ("\n\n", "\n", " "):
                cut = text.rfind(sep, floor, end)
                if cut > 0:
                    end = cut + len(sep)
                    break
        out.append(Section(text=text[start:end], page=section.page, flags=section.flags))
        start = end
    return out


def chunk_sections(sections: Sequence[Section], tokenizer: Tokenizer, spec: ChunkSpec) -> list[TextChunk]:
    sections = [b for s in sections for b in _blocks(s)]
    texts = [s.text for s in sections]
    out: list[TextChunk] = []
    for section, spans in zip(sections, _spans_in_groups(tokenizer, texts), strict=True):
        pieces = split_text(section.text, spans, spec)
        if not pieces and section.flags:
            # A section whose only content was hidden still records its flag on the document.
            continue
        out.extend(TextChunk(text=p, page=section.page, flags=section.flags) for p in pieces)
    return out
