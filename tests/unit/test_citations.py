"""Citations quote exactly; ``[Sn]`` markers map to returned sources only; uncited answers are marked."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.chunking.passages import terms
from docquery.core.domain import AclFilter, Chunk, Citation, Hit, Principal, Prompt
from docquery.core.ports import SearchMode
from docquery.generators.extractive import ExtractiveGenerator
from docquery.rag.citations import MIN_SNIPPET, SNIPPET_CHARS, citations_for, snippet_span
from docquery.rag.pipeline import RagPipeline, RetrievalConfig
from docquery.rag.sanitize import Sanitizer
from tests.support.fakes import HashEmbedder
from tests.support.markdown_oracle import violations

CLEAN = Sanitizer()
_PIECES = st.sampled_from(
    ["word", "longerword", "é", " ", "  ", "\n", "\n\n", ".", ",", "<b>", "p < 0.05", "[x](http://evil.test/q)",
     "![i](https://e.test/a.png)", "www.evil.test", "javascript:alert(1)", "[S1]", "ünïcode", "x" * 40,
     "    ", "\n    ", "```", "~~~", "`a|b`", "|", "\n-|-\n", "# ", "> ", "- ", "1. ", "[r]: ", "\t"]
)  # fmt: skip


def exact_snippet(text: str, clean: Callable[[str], str], question: str = "") -> str:
    start, end = snippet_span(text, terms(question), clean)
    return text[start:end]


def test_a_passage_with_line_breaks_is_quoted_past_them() -> None:
    text = "Travel and Expense Policy\n\nSubmit every expense report within\n30 days of the trip. " * 3
    snippet = exact_snippet(text.strip(), CLEAN.label, "when is the expense report due")
    assert snippet == "Submit every expense report within\n30 days of the trip."


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(_PIECES, min_size=1, max_size=120).map("".join).map(str.strip).filter(bool),
    one_line=st.booleans(),
    question=st.sampled_from(["", "longerword", "word unicode", "evil"]),
)
def test_snippets_are_exact_safe_runs_cut_at_word_boundaries(text: str, one_line: bool, question: str) -> None:
    clean = CLEAN.label if one_line else CLEAN  # the pipeline's, and the answers' sanitiser
    start, end = snippet_span(text, terms(question), clean)
    snippet = text[start:end]
    assert 0 <= start <= end <= len(text)
    assert len(snippet) <= SNIPPET_CHARS
    assert clean(snippet).split() == snippet.split()  # nothing the sanitiser would rewrite but whitespace
    assert not violations(snippet)  # and, rendered with its line breaks, inert in every renderer
    if snippet:
        # Starts and ends at word boundaries (a word longer than the snippet is cut).
        assert start == 0 or text[start - 1].isspace() or text[start - 1] in ".!?"
        assert end == len(text) or text[end].isspace() or len(snippet) == SNIPPET_CHARS
        assert snippet.strip() not in (">>>", "...", "#")


_SENTENCES = st.lists(
    st.sampled_from(
        ["The backup runs nightly.", "Restores take one hour.", ">>>", "Use a list:", "See below.", "x = [1]."]
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(sentences=_SENTENCES, heading=st.sampled_from(["", "# Backups\n\n", "Backup and restore\n"]))
def test_a_snippet_is_the_most_relevant_sentence_never_a_prompt_or_a_heading(
    sentences: list[str], heading: str
) -> None:
    text = heading + " ".join(sentences)
    start, end = snippet_span(text, terms("how long do restores take"), CLEAN.label)
    snippet = text[start:end]
    assert snippet.strip() != ">>>" and not snippet.startswith(("#", "Backup and restore"))
    if "Restores take one hour." in sentences:
        assert "Restores take one hour." in snippet
    if snippet and len(snippet) < MIN_SNIPPET:
        # Shorter only where its neighbours are not quotable (a prompt, a heading, markup) or absent.
        before, after = text[:start].split(), text[end:].split()
        assert (not before or before[-1] in (">>>", "list:", "[1].")) or (not after or after[0] in (">>>", "x", "Use"))


def test_a_plain_long_passage_is_quoted_up_to_the_last_whole_word() -> None:
    text = "The quick brown fox jumps over the lazy dog and keeps running far away. " * 20
    snippet = exact_snippet(text.strip(), CLEAN)
    assert snippet == "The quick brown fox jumps over the lazy dog and keeps running far away."


def test_an_opening_prompt_is_never_the_snippet() -> None:
    text = ">>>\n\nsubprocess.run() runs a command and waits for it to complete, then returns its result."
    assert exact_snippet(text, CLEAN.label, "run a command").startswith("subprocess.run() runs a command")


def _hit(i: int, text: str) -> Hit:
    chunk = Chunk(
        id=f"c{i}", doc_id=f"d{i}", source=f"d{i}.md", title=f"T{i}", chunk_index=0, text=text,
        content_sha256="0" * 64, acl_groups=("eng",), page="Guide > Part", section=2, char_start=10 * i,
        char_end=10 * i + len(text),
    )  # fmt: skip
    return Hit(chunk=chunk, score=1.0 - i / 10, dense_score=0.9)


def test_citations_carry_section_offsets_and_truncation() -> None:
    hits = [_hit(1, "Short passage."), _hit(2, "Long passage words. " * 40)]
    short, long_ = citations_for(hits, clean=CLEAN)
    assert (short.section, short.char_start, short.char_end, short.snippet_truncated) == (2, 10, 24, False)
    assert short.snippet == "Short passage."
    assert long_.snippet_truncated and long_.snippet in hits[1].chunk.text
    assert hits[1].chunk.text[long_.snippet_start : long_.snippet_end] == long_.snippet


class _Index:
    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits

    async def search(
        self,
        *,
        dense: Sequence[float] | None,
        text: str | None,
        acl: AclFilter,
        limit: int,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]:
        return self.hits[:limit]


class _Scripted:
    def __init__(self, reply: list[str], mode: Literal["generative", "extractive"] = "generative") -> None:
        self.reply = reply
        self._mode = mode

    @property
    def model(self) -> str:
        return "scripted"

    @property
    def mode(self) -> Literal["generative", "extractive"]:
        return self._mode

    async def complete(self, prompt: Prompt) -> str:
        return "".join(self.reply)

    async def stream(self, prompt: Prompt) -> AsyncIterator[str]:
        for part in self.reply:
            yield part

    async def aclose(self) -> None:
        return None


def _pipeline(reply: list[str]) -> RagPipeline:
    return RagPipeline(
        embedder=HashEmbedder(),
        index=_Index([_hit(1, "One."), _hit(2, "Two.")]),  # type: ignore[arg-type]
        generator=_Scripted(reply),
        sanitizer=CLEAN,
        retrieval=RetrievalConfig(mode="dense", min_dense_score=0.0),
    )


ALICE = Principal(id="alice", groups=frozenset({"eng"}))


@pytest.mark.parametrize(
    ("reply", "answer", "uncited"),
    [
        (["Yes [S1] and [S2]."], "Yes [S1] and [S2].", False),
        (["Yes [S", "3] and [S", "2]."], "Yes  and [S2].", False),
        (["Made up [S9] [S0]."], "Made up  .", True),  # only invented markers: cites nothing
        (["No markers at all."], "No markers at all.", True),
    ],
)
def test_markers_map_to_returned_citations_and_uncited_answers_are_marked(
    reply: list[str], answer: str, uncited: bool
) -> None:
    result = asyncio.run(_pipeline(reply).answer("q", ALICE, 5, "r1"))
    assert (result.answer, result.uncited) == (answer, uncited)
    assert [c.id for c in result.citations] == ["S1", "S2"]

    async def stream() -> tuple[str, bool]:
        text, done = "", {}
        async for ev in _pipeline(reply).answer_stream("q", ALICE, 5, "r2"):
            if ev.event == "delta":
                text += ev.data["text"]
            if ev.event == "done":
                done = ev.data
        return text, bool(done["uncited"])

    assert asyncio.run(stream()) == (answer, uncited)


# What a document or a model may write where a marker stands: any count of ASCII digits (Python's int()
# refuses more than 4,300 of them), leading zeros, and digits of other scripts.
_DIGITS = st.one_of(
    st.integers(0, 99_999).map(str),
    st.integers(4_290, 6_000).map(lambda n: "1" * n),
    st.tuples(st.integers(0, 5_000), st.sampled_from("0123")).map(lambda t: "0" * t[0] + t[1]),
    st.text(st.sampled_from("0123٣²१"), min_size=1, max_size=6),
)


def _expected(digits: str, n_sources: int) -> str:
    """The model of a marker: "[S", 1 to 4 ASCII digits, "]". One that names a source (1 to n) is kept,
    written without leading zeros; one that names none is dropped; anything else is text, escaped."""
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 4):
        return f"\\[S{digits}\\]"
    return f"[S{int(digits)}]" if 1 <= int(digits) <= n_sources else ""


@settings(max_examples=150, deadline=None)
@given(digits=_DIGITS, cut=st.integers(0, 40))
def test_a_marker_of_any_length_is_kept_or_dropped_and_never_breaks_the_answer(digits: str, cut: int) -> None:
    reply = f"See [S{digits}] and [S1]."
    pieces = [reply[:cut], reply[cut:]]
    result = asyncio.run(_pipeline(pieces).answer("q", ALICE, 5, "r1"))
    assert result.answer == f"See {_expected(digits, 2)} and [S1]."
    assert not result.uncited

    async def stream() -> str:
        events = [ev async for ev in _pipeline(pieces).answer_stream("q", ALICE, 5, "r2")]
        return "".join(ev.data["text"] for ev in events if ev.event == "delta")

    assert asyncio.run(stream()) == result.answer


@settings(max_examples=60, deadline=None)
@given(digits=st.lists(_DIGITS, min_size=1, max_size=3))
def test_a_passage_cannot_cite_in_an_extractive_answer(digits: list[str]) -> None:
    planted = " ".join(f"Leave is [S{d}] 25 days." for d in digits)
    pipeline = RagPipeline(
        embedder=HashEmbedder(),
        index=_Index([_hit(1, planted), _hit(2, "Two.")]),  # type: ignore[arg-type]
        generator=ExtractiveGenerator(),
        sanitizer=CLEAN,
        retrieval=RetrievalConfig(mode="dense", min_dense_score=0.0),
    )
    result = asyncio.run(pipeline.answer("how many days of leave", ALICE, 5, "r1"))
    quoted = result.answer.splitlines()[2]
    assert quoted.endswith(" [S1]") and "25 days." in quoted
    # The generator's own markers are the only ones left (the sanitiser escapes the brackets of what is none).
    assert re.findall(r"\[S[0-9]+\]", result.answer) == ["[S1]", "[S2]"]
    assert not result.uncited


class _Paced(_Scripted):
    """Says when its call went out and when it answered, and answers after ``delay`` seconds."""

    def __init__(self, log: list[str], delay: float) -> None:
        super().__init__(["Yes [S1]."])
        self.log = log
        self.delay = delay

    async def complete(self, prompt: Prompt) -> str:
        self.log.append("llm called")
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.log.append("llm cancelled")
            raise
        self.log.append("llm answered")
        return "".join(self.reply)


def _paced_pipeline(
    log: list[str], delay: float, *, snippets_fail: bool = False, chosen: asyncio.Event | None = None
) -> RagPipeline:
    pipeline = _pipeline([])
    pipeline.generator = _Paced(log, delay)
    choose = pipeline.citations

    def citations(hits: list[Hit], question: str = "") -> list[Citation]:
        log.append("snippets")
        if chosen is not None:
            chosen.set()
        if snippets_fail:
            raise RuntimeError("snippets failed")
        return choose(hits, question)

    pipeline.citations = citations  # type: ignore[method-assign]
    return pipeline


def test_snippets_are_chosen_while_the_llm_writes_not_before_its_call_nor_after() -> None:
    log: list[str] = []
    result = asyncio.run(_paced_pipeline(log, 0.05).answer("one", ALICE, 5, "r1"))
    assert log == ["llm called", "snippets", "llm answered"]
    assert [c.snippet for c in result.citations] == ["One.", "Two."]
    assert result.answer == "Yes [S1]."


def test_an_llm_that_answers_at_once_still_gets_its_citations() -> None:
    log: list[str] = []
    result = asyncio.run(_paced_pipeline(log, 0.0).answer("one", ALICE, 5, "r1"))
    assert log[0] == "llm called" and "snippets" in log
    assert [c.id for c in result.citations] == ["S1", "S2"]


def test_when_the_snippets_fail_the_llm_call_is_cancelled_and_the_error_surfaces() -> None:
    log: list[str] = []

    async def run() -> None:
        with pytest.raises(RuntimeError, match="snippets failed"):
            await _paced_pipeline(log, 30.0, snippets_fail=True).answer("one", ALICE, 5, "r1")
        await asyncio.sleep(0)  # the cancelled call runs to its end

    asyncio.run(asyncio.wait_for(run(), 5))
    assert log == ["llm called", "snippets", "llm cancelled"]


def test_a_caller_that_goes_away_cancels_the_llm_call() -> None:
    log: list[str] = []

    async def run() -> None:
        chosen = asyncio.Event()
        task = asyncio.ensure_future(_paced_pipeline(log, 30.0, chosen=chosen).answer("one", ALICE, 5, "r1"))
        await chosen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(run(), 5))
    assert log == ["llm called", "snippets", "llm cancelled"]
