"""Extractive answers are quotes that never stitch: each bullet is one contiguous span of its source.

Over generated documents (prose paragraphs, headings and fenced code with blank lines, brackets
and prompts): every bullet is an exact substring of the cited passage modulo whitespace, the
sentences that share words with the question win over the opening, and a span far below the
best one is left out.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.chunking.passages import terms, units
from docquery.core.domain import Chunk, Hit, Prompt
from docquery.generators.extractive import ExtractiveGenerator

_WORDS = ["policy", "leave", "server", "install", "client", "budget", "travel", "report", "archive", "backup"]


def _sentence(n: int, words: list[str]) -> str:
    # Each sentence carries a word of its own ("zqN"), so two sentences are never equal.
    return " ".join([f"Zq{n}", *words]) + "."


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A passage and its sentences, in order."""
    parts: list[str] = []
    sentences: list[str] = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["prose", "prose", "heading", "code"]))
        if kind == "heading":
            parts.append(draw(st.sampled_from(["# Overview", "Installing the client", "## Notes"])))
        elif kind == "code":
            body = draw(
                st.lists(
                    st.sampled_from(['>>> run(["ls"], check=True)', "x = [1, 2]", "", "<b>{a}</b>", "\tindented()"]),
                    min_size=1,
                    max_size=5,
                )
            )
            parts.append("```py\n" + "\n".join(["first()", *body]) + "\n```")
        else:
            para = []
            for _ in range(draw(st.integers(min_value=1, max_value=4))):
                words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6))
                para.append(_sentence(len(sentences), words))
                sentences.append(para[-1])
            parts.append(draw(st.sampled_from([" ", "\n", "  "])).join(para))
    return "\n\n".join(parts), sentences


def _answer(text: str, question: str) -> list[str]:
    chunk = Chunk(
        id="c", doc_id="d", source="s", title="t", chunk_index=0, text=text, content_sha256="", acl_groups=("g",)
    )
    hit = Hit(chunk=chunk, score=1.0)
    out = ExtractiveGenerator().render(Prompt(question=question, sources=(hit,), messages=()))
    body = out.split("\n\n", 1)[1].rstrip("\n")
    return re.split(r"\n(?=- )", body) if body else []


def _flat(text: str) -> str:
    return " ".join(text.split())


@settings(max_examples=200, deadline=None, database=None)
@given(doc=documents(), pick=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3))
def test_every_bullet_is_one_span_of_its_passage(doc: tuple[str, list[str]], pick: list[str]) -> None:
    text, sentences = doc
    bullets = _answer(text, "What about " + " and ".join(pick) + "?")
    assert len(bullets) <= 3
    for bullet in bullets:
        assert bullet.startswith("- ")
        if bullet.startswith("- [S1]\n"):  # a code block, quoted as stored
            body = "\n".join(line.removeprefix("  ") for line in bullet.split("\n")[2:])
            assert body in text and body.startswith("```py\n") and body.endswith("```")
            continue
        quote = bullet[2:].removesuffix(" [S1]")
        assert _flat(quote) in _flat(text)
        # Whole sentences only, and next to each other: never two sentences that are apart.
        numbers = [int(n) for n in re.findall(r"Zq(\d+)", quote)]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
        assert all(_flat(sentences[n]) in _flat(quote) for n in numbers)


@settings(max_examples=200, deadline=None, database=None)
@given(doc=documents(), word=st.sampled_from(_WORDS))
def test_the_sentences_that_answer_win_and_far_weaker_ones_are_left_out(doc: tuple[str, list[str]], word: str) -> None:
    text, sentences = doc
    question = terms(f"tell me about {word}")
    answer = "\n".join(_answer(text, f"Tell me about {word}"))
    matching = [s for s in sentences if question & terms(s)]
    if matching:
        # Some sentence answers: the quotes hold one of them, and no sentence that shares nothing.
        assert any(s in answer for s in matching)
        assert not [s for s in sentences if s in answer and not question & terms(s)]
    quoted = [u for u in units(text) if u.kind == "prose" and text[u.start : u.end] in answer]
    assert quoted or "```" in answer or not sentences


def test_a_sentence_of_another_function_is_never_joined_to_the_one_quoted() -> None:
    text = (
        "fileinput.filename() Return the name of the file currently being read. Before the first line "
        "has been read, returns None.\n\nfileinput.lineno() Return the cumulative line number of the line "
        "that has just been read. After the last line of the last file has been read, returns the line "
        "number of that line."
    )
    bullets = _answer(
        text, "What does fileinput.filename() return before the first line has been read, and after the last?"
    )
    for bullet in bullets:
        quote = bullet[2:].removesuffix(" [S1]")
        assert _flat(quote) in _flat(text)
        assert not ("returns None" in quote and "After the last line" in quote)


def test_the_opening_is_quoted_only_when_nothing_matches() -> None:
    text = "Overview of the service. The backup runs nightly at two. Restores take an hour."
    assert _answer(text, "When does the backup run?") == ["- The backup runs nightly at two. [S1]"]
    assert _answer(text, "Completely unrelated words?") == ["- Overview of the service. [S1]"]


def test_code_is_quoted_as_code_with_its_lines() -> None:
    code = '```python\n>>> subprocess.run(["ls"], capture_output=True)\n\n>>> print(x)\n```'
    text = f"Use subprocess to run commands.\n\n{code}\n\nThe result holds the output."
    bullets = _answer(text, "How do I run ls with subprocess capture_output?")
    assert any(b == "- [S1]\n\n" + "\n".join(f"  {x}" if x else "" for x in code.split("\n")) for b in bullets)
