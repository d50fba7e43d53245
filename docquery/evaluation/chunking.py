"""Split a BEIR document into chunks that fit the embedder's window.

A document is one chunk ("title\\n\\ntext") unless it has more tokens than the
window; then its text is cut at token boundaries into windows, each prefixed
with the title, so chunk 0 is exactly what a truncating embedder would see.
Cuts use the tokenizer's character offsets, so chunk text stays the original
text (BM25 then sees real words, not word pieces).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Spans = list[tuple[int, int]]
Tokenize = Callable[[str], Spans]

_WORD = re.compile(r"\S+")
# The model adds [CLS] and [SEP] around every input.
SPECIAL_TOKENS = 2


def whitespace_spans(text: str) -> Spans:
    return [m.span() for m in _WORD.finditer(text)]


def tokenizer_spans(tokenizer: Any) -> Tokenize:
    """Character spans of the model's own tokens (needs a fast HF tokenizer)."""

    def spans(text: str) -> Spans:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

    return spans


def chunk_document(title: str, text: str, tokenize: Tokenize, *, max_tokens: int, overlap: int = 32) -> list[str]:
    """``max_tokens`` counts the special tokens too (256 for all-MiniLM-L6-v2)."""
    title = title.strip()
    text = text.strip()
    head = f"{title}\n\n" if title else ""
    budget = max_tokens - SPECIAL_TOKENS
    title_len = len(tokenize(title)) if title else 0
    spans = tokenize(text)
    if title_len + len(spans) <= budget:
        return [f"{head}{text}" if text else title]
    # A title longer than half the window would leave too little room: drop it from the chunks.
    if title_len > budget // 2:
        head, title_len = "", 0
    window = budget - title_len
    step = max(window - overlap, 1)
    chunks: list[str] = []
    start = 0
    while start < len(spans):
        end = min(start + window, len(spans))
        chunks.append(head + text[spans[start][0] : spans[end - 1][1]])
        if end == len(spans):
            break
        start += step
    return chunks
