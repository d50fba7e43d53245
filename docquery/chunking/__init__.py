"""Token-aware chunking with the embedder's own tokenizer: the chunker that ships.

Ingest chunks documents with it and the retrieval evaluation chunks its corpus with
it, with the same settings, so the published figures measure what ingest writes.

Sizes are counted in the model's tokens, so a chunk never overflows its window
(all-MiniLM-L6-v2: 256 tokens including [CLS]/[SEP]; the default 200 + 30
overlap leaves room). llama-index's ``SentenceSplitter`` cuts at paragraph and
sentence boundaries and overlaps by whole sentences. Chunk text is an exact
slice of the section text, and each chunk records its section and character
offsets, so a citation can point at the passage it quotes.

Chunking runs on ingest's caller thread while the embedder's workers want every core, so its
CPU is ingest throughput: each text is tokenized once and every count is read from its offsets.
"""

from docquery.chunking.sentences import (
    EMBED_WINDOW_TOKENS,
    SPLITTER_VERSION,
    ChunkSpec,
    Section,
    SentenceChunker,
    TextChunk,
    TitlePrefix,
    chunk_sections,
    embedding_text,
    preload,
)
from docquery.chunking.tokenizers import HFTokenizer, RegexTokenizer, Span, Tokenizer, tokenizer_for

__all__ = [
    "EMBED_WINDOW_TOKENS",
    "SPLITTER_VERSION",
    "ChunkSpec",
    "HFTokenizer",
    "RegexTokenizer",
    "Section",
    "SentenceChunker",
    "Span",
    "TextChunk",
    "TitlePrefix",
    "Tokenizer",
    "chunk_sections",
    "embedding_text",
    "preload",
    "tokenizer_for",
]
