"""Tokenizers the chunker counts with: the embedder's own (Hugging Face ``tokenizers``), or a conservative fallback."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

Span = tuple[int, int]


class Tokenizer(Protocol):
    #: True when a slice of a text that starts and ends next to whitespace (or at the text's
    #: ends) has exactly the text's own tokens inside it; token counts are then read from one
    #: pass over the whole text instead of tokenizing every chunk again.
    exact_at_spaces: bool

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        """Character spans of each token of each text (no special tokens, no truncation)."""
        ...

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no special tokens, no truncation): ``len(spans([text])[0])``."""
        ...


# Pre-tokenizers that cut at every whitespace and never keep it in a token, and normalizers that
# map each character on its own: with these, a slice cut next to whitespace tokenizes exactly as
# the same stretch of the whole text. Any other tokenizer has each chunk counted on its own.
_SPACE_SPLITTING = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
_PER_CHARACTER = frozenset({"BertNormalizer", "Lowercase", "StripAccents", "NFD", "NFC"})


def _splits_at_spaces(config: dict[str, Any]) -> bool:
    def kinds(part: dict[str, Any] | None) -> set[str]:
        if part is None:
            return set()
        if part.get("type") != "Sequence":
            return {str(part.get("type"))}
        return {k for p in part.get("pretokenizers") or part.get("normalizers") or [] for k in kinds(p)}

    pre, norm = kinds(config.get("pre_tokenizer")), kinds(config.get("normalizer"))
    return bool(pre & _SPACE_SPLITTING) and pre <= _SPACE_SPLITTING and norm <= _PER_CHARACTER


class HFTokenizer:
    """Wraps a Hugging Face fast tokenizer (``LocalEmbedder.tokenizer``) or a ``tokenizers.Tokenizer``."""

    def __init__(self, hf_tokenizer: Any) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        backend = getattr(hf_tokenizer, "backend_tokenizer", hf_tokenizer)
        # A private copy: the bundled tokenizer.json pins truncation at 128, and the
        # embedder's own instance must not be reconfigured under it.
        config = backend.to_str()
        self._tok = RustTokenizer.from_str(config)
        self._tok.no_truncation()
        self._tok.no_padding()
        self.exact_at_spaces = _splits_at_spaces(json.loads(config))

    @classmethod
    def from_file(cls, path: str) -> HFTokenizer:
        from tokenizers import Tokenizer as RustTokenizer

        return cls(RustTokenizer.from_file(path))

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        # One text at a time on the calling thread: ``encode_batch`` hands even one text to the
        # library's thread pool, whose spinning threads take CPU from the embedder's workers.
        encode = self._tok.encode
        return [encode(t, add_special_tokens=False).offsets for t in texts]

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


class RegexTokenizer:
    """Fallback for embedders without a local tokenizer: word pieces of at most 4 characters
    (conservative: real WordPiece/BPE tokens are usually longer, so chunks stay inside the window)."""

    _PIECE = re.compile(r"\w{1,4}|[^\w\s]")
    exact_at_spaces = True  # a piece never holds whitespace, and matching restarts after it

    def spans(self, texts: Sequence[str]) -> list[list[Span]]:
        return [[m.span() for m in self._PIECE.finditer(t)] for t in texts]

    def count(self, text: str) -> int:
        return sum(1 for _ in self._PIECE.finditer(text))


def tokenizer_for(embedder: object) -> Tokenizer:
    hf = getattr(embedder, "tokenizer", None)
    if hf is not None and (hasattr(hf, "backend_tokenizer") or hasattr(hf, "encode_batch")):
        return HFTokenizer(hf)
    return RegexTokenizer()
