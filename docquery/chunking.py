"""Token-aware chunking with the embedder's own tokenizer: the chunker that ships.

Ingest chunks documents with it and the retrieval evaluation chunks its corpus with
it, with the same settings, so the published figures measure what ingest writes.

Sizes are counted in the model's tokens, so a chunk never overflows its window
(all-MiniLM-L6-v2: 256 tokens including [CLS]/[SEP]; the default 200 + 30
overlap leaves room). llama-index's ``SentenceSplitter`` cuts at paragraph and
sentence boundaries and overlaps by whole sentences. Chunk text is an exact
slice of the section text, and each chunk records its section and character
offsets, so a citation can point at the passage it quotes.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
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

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no special tokens, no truncation): ``len(spans([text])[0])``."""
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

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


class RegexTokenizer:
    """Fallback for embedders without a local tokenizer: word pieces of at most 4 characters
    (conservative: real WordPiece/BPE tokens are usually longer, so chunks stay inside the window)."""

    _PIECE = re.compile(r"\w{1,4}|[^\w\s]")

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        return [[m.span() for m in self._PIECE.finditer(t)] for t in texts]

    def count(self, text: str) -> int:
        return sum(1 for _ in self._PIECE.finditer(text))


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
        # Names the splitter too: documents chunked by an earlier splitter re-index.
        return f"{SPLITTER_VERSION}/{self.size}/{self.overlap}"


@dataclass(frozen=True)
class TextChunk:
    """A chunk and where it came from: ``text == sections[section].text[start:end]``."""

    text: str
    page: str | None
    flags: frozenset[str]
    section: int = 0
    start: int = 0
    end: int = 0


SPLITTER_VERSION = "sentences2"  # 2: later chunks are embedded with their document's title
# The bundled model's window (256) less [CLS] and [SEP]: chunk plus title prefix stay inside it.
EMBED_WINDOW_TOKENS = 254
# The loaders join paragraphs with one blank line; llama-index's default is two.
PARAGRAPH_SEPARATOR = "\n\n"


def preload() -> None:
    """Import the splitter's libraries now (seconds), e.g. before a parse process reports ready."""
    SentenceChunker(RegexTokenizer(), ChunkSpec())


class SentenceChunker:
    """llama-index's ``SentenceSplitter`` counting the embedder's tokens, located in the source text.

    Chunks start and end at sentence (or paragraph) boundaries and overlap by whole sentences;
    only a sentence longer than the window is cut inside (llama-index then splits at clause
    marks, then words). Every chunk is checked with the real tokenizer and re-cut at token
    windows if it still exceeds ``spec.size`` (split token counts need not add up exactly).
    """

    def __init__(self, tokenizer: Tokenizer, spec: ChunkSpec) -> None:
        # Imported here: llama-index costs about two seconds of import, and only chunking needs it.
        from llama_index.core.callbacks import CallbackManager
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.node_parser.text.utils import split_by_sentence_tokenizer_internal
        from nltk.tokenize.punkt import PunktSentenceTokenizer  # type: ignore[import-untyped]  # no stubs

        # Punkt is built here, not through llama-index's globals helper, which would try to
        # download NLTK data (network at run time) when NLTK_DATA points at an empty directory.
        punkt = PunktSentenceTokenizer()
        self._tokenizer = tokenizer
        self.spec = spec

        def splitter(count: Callable[[str], int]) -> Any:
            return SentenceSplitter(
                chunk_size=spec.size,
                chunk_overlap=spec.overlap,
                tokenizer=lambda text: range(count(text)),  # only its len() is used
                paragraph_separator=PARAGRAPH_SEPARATOR,
                chunking_tokenizer_fn=lambda text: split_by_sentence_tokenizer_internal(text, punkt),
                callback_manager=CallbackManager([]),
                include_metadata=False,
                include_prev_next_rel=False,
            )

        self._splitter = splitter

    def split(self, text: str) -> list[Span]:
        """Character spans of the chunks of ``text``, in order."""
        if not text.strip():
            return []
        spans = self._tokenizer.spans([text])[0]
        try:
            pieces = self._splitter(_SpanCounter(text, spans, self._tokenizer)).split_text(text)
        except ValueError:  # "Single token exceeded chunk size": cannot happen for size >= 16; be safe
            pieces = []
        located = _locate(text, pieces)
        if located is None:
            return _token_windows(text, spans, self.spec)
        # The window is checked by tokenizing each chunk as it will be embedded (one batch).
        counts = [len(s) for s in self._tokenizer.spans([text[a:b] for a, b in located])]
        out: list[Span] = []
        for (a, b), n in zip(located, counts, strict=True):
            if n <= self.spec.size:
                out.append((a, b))
                continue
            part = text[a:b]
            out.extend((a + x, a + y) for x, y in _token_windows(part, self._tokenizer.spans([part])[0], self.spec))
        return out


class _SpanCounter:
    """Counts the tokens of a piece of ``text`` from the text's own token spans (one tokenizer pass).

    llama-index asks for the whole text, then each split in order, depth first; a cursor finds
    each piece. A piece not found is tokenized on its own. The counts only guide the splitter:
    ``SentenceChunker.split`` checks every chunk with the tokenizer itself.
    """

    def __init__(self, text: str, spans: list[Span], tokenizer: Tokenizer) -> None:
        self._text = text
        self._starts = [a for a, _ in spans]
        self._ends = [b for _, b in spans]
        self._tokenizer = tokenizer
        self._cursor = 0

    def __call__(self, piece: str) -> int:
        at = self._text.find(piece, self._cursor)
        if at < 0 or not piece:
            return self._tokenizer.count(piece)
        self._cursor = at
        first = bisect.bisect_left(self._starts, at)
        last = bisect.bisect_right(self._ends, at + len(piece))
        return max(0, last - first)


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
    chunker = SentenceChunker(tokenizer, spec)
    out: list[TextChunk] = []
    for number, section in enumerate(sections):
        for block_start, block_end in _blocks(section.text):
            block = section.text[block_start:block_end]
            for a, b in chunker.split(block):
                start, end = block_start + a, block_start + b
                out.append(TextChunk(section.text[start:end], section.page, section.flags, number, start, end))
    return out


def embedding_text(title: str, text: str, tokenizer: Tokenizer, spec: ChunkSpec) -> str:
    """What is embedded for a chunk: its document's title, then the chunk text.

    A passage cut from the middle of a document rarely names its subject; the title carries it.
    Nothing is added when the chunk already starts with the title (the first chunk of a text
    file). The title is cut to the room the window leaves beside a full chunk, so chunk plus
    prefix never exceed ``EMBED_WINDOW_TOKENS``. The stored text and the sparse index are unchanged.
    """
    head = " ".join(title.split())
    room = EMBED_WINDOW_TOKENS - spec.size
    if not head or room <= 0 or text.startswith(head):
        return text
    spans = tokenizer.spans([head])[0]
    if not spans:
        return text
    if len(spans) > room:
        head = head[: spans[room - 1][1]]
    return f"{head}\n\n{text}"
