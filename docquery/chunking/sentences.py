"""Sentence-aware chunks: llama-index's ``SentenceSplitter``, counted in the embedder's tokens.

The package docstring (docquery/chunking/__init__.py) says why each choice was made.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from docquery.chunking.code import CodeBlock, Piece, block_parts, code_blocks
from docquery.chunking.tokenizers import RegexTokenizer, Span, Tokenizer


@dataclass(frozen=True)
class Section:
    """A run of document text with one location: a heading path (md, html, docx) or a page (pdf)."""

    text: str
    page: str | None = None
    flags: frozenset[str] = frozenset()


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
        # Names the splitter too: documents chunked by an earlier splitter re-index.
        return f"{SPLITTER_VERSION}/{self.size}/{self.overlap}"


@dataclass(frozen=True)
class TextChunk:
    """A chunk and where it came from: ``text == sections[section].text[start:end]``, but for a
    part of a code block too long for one chunk, which gets its fence lines around that slice."""

    text: str
    page: str | None
    flags: frozenset[str]
    section: int = 0
    start: int = 0
    end: int = 0


SPLITTER_VERSION = "sentences3"  # 2: later chunks embedded with their title; 3: code blocks kept whole
# The bundled model's window (256) less [CLS] and [SEP]: chunk plus title prefix stay inside it.
EMBED_WINDOW_TOKENS = 254
# The loaders join paragraphs with one blank line; llama-index's default is two.
PARAGRAPH_SEPARATOR = "\n\n"


def preload() -> None:
    """Import the splitter's libraries now (seconds), e.g. before a parse process reports ready."""
    SentenceChunker(RegexTokenizer(), ChunkSpec()).load()


class SentenceChunker:
    """llama-index's ``SentenceSplitter`` counting the embedder's tokens, located in the source text.

    Chunks start and end at sentence (or paragraph) boundaries and overlap by whole sentences;
    only a sentence longer than the window is cut inside (llama-index then splits at clause
    marks, then words). Every chunk's tokens are counted exactly and a chunk still over
    ``spec.size`` is re-cut at token windows (split token counts need not add up exactly).

    Build one per run: the splitter and Punkt are made on first use and reused. Each text is
    tokenized once; chunk counts are read from its token offsets where the tokenizer allows it
    (``Tokenizer.exact_at_spaces``). A text within the window is one chunk without llama-index.
    One thread at a time: a split sets the counter the splitter reads. It pickles (the parse
    process gets it) without its splitter, which the other side builds again.
    """

    def __init__(self, tokenizer: Tokenizer, spec: ChunkSpec) -> None:
        self.tokenizer = tokenizer
        self.spec = spec
        self._splitter: Any = None
        self._counts: _Counts | None = None

    def __getstate__(self) -> dict[str, object]:
        return {"tokenizer": self.tokenizer, "spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["tokenizer"], state["spec"])  # type: ignore[misc]  # rebuild, splitter unbuilt

    def load(self) -> Any:
        """The llama-index splitter, built on first use."""
        if self._splitter is None:
            # Imported here: llama-index and NLTK cost seconds and memory, and only texts longer
            # than the window need them.
            from llama_index.core.callbacks import CallbackManager
            from llama_index.core.node_parser import SentenceSplitter
            from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer_internal
            from nltk.tokenize.punkt import PunktSentenceTokenizer  # type: ignore[import-untyped]  # no stubs

            # Punkt is built here, not through llama-index's globals helper, which would try to
            # download NLTK data (network at run time) when NLTK_DATA points at an empty directory.
            punkt = PunktSentenceTokenizer()
            self._splitter = SentenceSplitter(
                chunk_size=self.spec.size,
                chunk_overlap=self.spec.overlap,
                tokenizer=lambda text: range(self._count(text)),  # only its len() is used
                paragraph_separator=PARAGRAPH_SEPARATOR,
                chunking_tokenizer_fn=lambda text: split_by_sentence_tokenizer_internal(text, punkt),
                callback_manager=CallbackManager([]),
                include_metadata=False,
                include_prev_next_rel=False,
            )
        return self._splitter

    def _count(self, piece: str) -> int:
        if self._counts is None:
            raise RuntimeError("the splitter counts tokens only inside SentenceChunker.split")
        return self._counts.of_piece(piece)

    def split(self, text: str) -> list[Span]:
        """Character spans of the chunks of ``text``, in order."""
        return [(p.start, p.end) for p in self.pieces(text)]

    def pieces(self, text: str) -> list[Piece]:
        """The chunks of ``text`` in order. A fenced code block is never cut unless it is longer than
        a chunk; then it is cut at line boundaries and each part is fenced again."""
        if not text.strip():
            return []
        counts = _Counts(text, self.tokenizer.spans([text])[0], self.tokenizer)
        if counts.total <= self.spec.size:  # what the splitter returns for a text that fits
            start = len(text) - len(text.lstrip())
            return [Piece(start, start + len(text.strip()))]
        blocks = code_blocks(text)
        if not blocks:
            return [Piece(a, b) for a, b in self._sentences(text, counts)]
        return self._around_code(text, counts, blocks)

    def _around_code(self, text: str, counts: _Counts, blocks: list[CodeBlock]) -> list[Piece]:
        """Prose between the blocks split as usual, each block whole or in parts, then neighbours
        joined while they fit (so a block stays with the sentence that introduces it)."""
        units: list[Piece] = []
        pos = 0
        for block in blocks:
            units.extend(self._prose(text, pos, block.start))
            if counts.exact(block.start, block.end) <= self.spec.size:
                units.append(Piece(block.start, block.end))
            else:
                fences = self.tokenizer.count(block.opening) + self.tokenizer.count(block.fence)
                room = max(1, self.spec.size - fences)
                for part in block_parts(text, block, counts.exact, room):
                    if counts.exact(part.start, part.end) <= room:
                        units.append(part)
                        continue
                    line = text[part.start : part.end]  # one line longer than a chunk: token windows
                    windows = _token_windows(line, self.tokenizer.spans([line])[0], ChunkSpec(max(16, room), 0))
                    units.extend(
                        Piece(part.start + a, part.start + b, block.opening + "\n", "\n" + block.fence)
                        for a, b in windows
                    )
            pos = block.end
        units.extend(self._prose(text, pos, len(text)))
        out: list[Piece] = []
        for unit in units:
            last = out[-1] if out else None
            if (
                last is not None
                and not (last.tail or unit.head)
                and unit.start >= last.end
                # A part's fence lines count too: the last part of a block carries its opening line.
                and counts.exact(last.start, unit.end) + self._fences(last.head) + self._fences(unit.tail)
                <= self.spec.size
            ):
                out[-1] = Piece(last.start, unit.end, last.head, unit.tail)
            else:
                out.append(unit)
        return out

    def _fences(self, line: str) -> int:
        return self.tokenizer.count(line) if line else 0

    def _prose(self, text: str, start: int, end: int) -> list[Piece]:
        part = text[start:end]
        return [Piece(start + a, start + b) for a, b in self._sentences_of(part)]

    def _sentences_of(self, text: str) -> list[Span]:
        if not text.strip():
            return []
        counts = _Counts(text, self.tokenizer.spans([text])[0], self.tokenizer)
        if counts.total <= self.spec.size:
            start = len(text) - len(text.lstrip())
            return [(start, start + len(text.strip()))]
        return self._sentences(text, counts)

    def _sentences(self, text: str, counts: _Counts) -> list[Span]:
        self._counts = counts
        try:
            pieces = self.load().split_text(text)
        except ValueError:  # "Single token exceeded chunk size": cannot happen for size >= 16; be safe
            pieces = []
        finally:
            self._counts = None
        located = _locate(text, pieces)
        if located is None:
            return counts.windows(self.spec)
        out: list[Span] = []
        for a, b in located:
            if counts.exact(a, b) <= self.spec.size:
                out.append((a, b))
                continue
            part = text[a:b]
            out.extend((a + x, a + y) for x, y in _token_windows(part, self.tokenizer.spans([part])[0], self.spec))
        return out

    def chunk(self, sections: Sequence[Section]) -> list[TextChunk]:
        out: list[TextChunk] = []
        for number, section in enumerate(sections):
            for block_start, block_end in _blocks(section.text):
                block = section.text[block_start:block_end]
                for p in self.pieces(block):
                    start, end = block_start + p.start, block_start + p.end
                    text = p.head + section.text[start:end] + p.tail
                    out.append(TextChunk(text, section.page, section.flags, number, start, end))
        return out


_start, _end = itemgetter(0), itemgetter(1)


def _is_space(ch: str) -> bool:
    # The whitespace a BERT-style pre-tokenizer cuts at. Python's str.isspace() also takes
    # control characters (\x1c to \x1f, \x85) that the normalizer deletes, joining the words
    # around them, so a cut there is not clean.
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


class _Counts:
    """Token counts of stretches of one text, from its token spans (one tokenizer pass)."""

    def __init__(self, text: str, spans: list[Span], tokenizer: Tokenizer) -> None:
        self._text = text
        self._spans = spans
        self._tokenizer = tokenizer
        self._cursor = 0
        self.total = len(spans)

    def _between(self, start: int, end: int) -> int:
        # Token ends rise with their starts, so both searches run on the one list of spans.
        last = bisect.bisect_right(self._spans, end, key=_end)
        return max(0, last - bisect.bisect_left(self._spans, start, key=_start))

    def of_piece(self, piece: str) -> int:
        """Guides llama-index: it asks for the whole text, then each split in order, depth first,
        so a cursor finds each piece. A piece not found is tokenized on its own."""
        at = self._text.find(piece, self._cursor)
        if at < 0 or not piece:
            return self._tokenizer.count(piece)
        self._cursor = at
        return self._between(at, at + len(piece))

    def _clean(self, pos: int) -> bool:
        text = self._text
        return pos in (0, len(text)) or _is_space(text[pos - 1]) or _is_space(text[pos])

    def exact(self, start: int, end: int) -> int:
        """The tokens of ``text[start:end]`` as it will be embedded on its own."""
        if self._tokenizer.exact_at_spaces and self._clean(start) and self._clean(end):
            return self._between(start, end)
        return self._tokenizer.count(self._text[start:end])

    def windows(self, spec: ChunkSpec) -> list[Span]:
        return _token_windows(self._text, self._spans, spec)


_SPACE = re.compile(r"\s*")


def _locate(text: str, pieces: list[str]) -> list[Span] | None:
    """Offsets of each piece (a stripped run of consecutive splits of ``text``); None if one is not found.

    Each piece starts inside the previous one (overlap) or just after it (only whitespace between)
    and ends past it; searching in that range places a piece right even when the text repeats.
    """
    out: list[Span] = []
    prev_start, prev_end = -1, 0
    for piece in pieces:
        if not piece:
            return None
        lo = max(prev_start + 1, prev_end - len(piece) + 1)
        hi = _SPACE.match(text, prev_end).end()  # type: ignore[union-attr]  # r"\s*" always matches
        at = text.rfind(piece, lo, hi + len(piece))  # the latest: llama-index keeps the overlap small
        if at < 0:
            return None
        out.append((at, at + len(piece)))
        prev_start, prev_end = at, at + len(piece)
    return out


def _cut(text: str, spans: list[Span], start: int, end: int, n: int) -> int:
    """Best end (exclusive token index) in the second half of [start, end): a space, else ``end``."""
    if end >= n:
        return n
    lo = start + (end - start) // 2
    for j in range(end, lo, -1):
        if text[spans[j - 1][1] : spans[j][0]]:
            return j
    return end


def _token_windows(text: str, spans: list[Span], spec: ChunkSpec) -> list[Span]:
    """Fallback for text no sentence split fits: token windows of ``spec.size``, cut at spaces."""
    n = len(spans)
    out: list[Span] = []
    start = 0
    while start < n:
        end = _cut(text, spans, start, min(start + spec.size, n), n)
        out.append((spans[start][0], spans[end - 1][1]))
        if end >= n:
            break
        start = max(end - spec.overlap, start + 1)
    return out


# Sections longer than this are split in blocks (cut at a paragraph, line or word break), so a
# 50 MB text file never materialises tens of millions of token offsets at once.
BLOCK_CHARS = 100_000


def _blocks(text: str) -> list[Span]:
    if len(text) <= BLOCK_CHARS:
        return [(0, len(text))]
    out: list[Span] = []
    start = 0
    while start < len(text):
        end = min(start + BLOCK_CHARS, len(text))
        if end < len(text):
            floor = start + BLOCK_CHARS // 2
            for sep in ("\n\n", "\n", ". ", " "):
                cut = text.rfind(sep, floor, end)
                if cut > 0:
                    end = cut + len(sep)
                    break
        out.append((start, end))
        start = end
    return out


def chunk_sections(sections: Sequence[Section], tokenizer: Tokenizer, spec: ChunkSpec) -> list[TextChunk]:
    """One-off chunking; code that chunks many documents keeps one ``SentenceChunker``."""
    return SentenceChunker(tokenizer, spec).chunk(sections)


@dataclass(frozen=True)
class TitlePrefix:
    """What goes in front of each chunk of one document when it is embedded: its title.

    A passage cut from the middle of a document rarely names its subject; the title carries it.
    Nothing is added to a chunk that already starts with the title (the first chunk of a text
    file). The title is cut to the room the window leaves beside a full chunk, so chunk plus
    prefix never exceed ``EMBED_WINDOW_TOKENS``. Worked out once per document; the stored chunk
    text is unchanged (the sparse index gets the embedded text).
    """

    title: str  # whitespace folded
    head: str  # the title as it is prefixed, "" for nothing

    @classmethod
    def of(cls, title: str, tokenizer: Tokenizer, spec: ChunkSpec) -> TitlePrefix:
        folded = " ".join(title.split())
        room = EMBED_WINDOW_TOKENS - spec.size
        if not folded or room <= 0:
            return cls(folded, "")
        spans = tokenizer.spans([folded])[0]
        if not spans:
            return cls(folded, "")
        return cls(folded, folded if len(spans) <= room else folded[: spans[room - 1][1]])

    def apply(self, text: str) -> str:
        if not self.head or text.startswith(self.title):
            return text
        return f"{self.head}\n\n{text}"


def embedding_text(title: str, text: str, tokenizer: Tokenizer, spec: ChunkSpec) -> str:
    """What is embedded for one chunk (``TitlePrefix``); chunks of one document share one prefix."""
    return TitlePrefix.of(title, tokenizer, spec).apply(text)
