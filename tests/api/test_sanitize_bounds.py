"""Deep container nesting in an answer costs linear time, one-shot and streamed: an LLM answer is hostile input,
and a pattern that backtracks on it would hold the event loop for every caller (400 nested quotes took minutes)."""

from __future__ import annotations

import pytest

from docquery.rag.sanitize import Sanitizer
from docquery.rag.sanitize_stream import StreamSanitizer
from tests.support.markdown_oracle import violations

PREFIXES = ["> ", ">", "- ", "1. ", "> - ", "* > ", "  > ", "> 1) ", "\t> "]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("tail", ["deep", "```", "~~~ code", "<img src=x onerror=alert(1)>"])
def test_deep_nesting_is_sanitised_one_shot_and_streamed(prefix: str, tail: str) -> None:
    for depth in (400, 40):  # 400 for the time bound; the oracle's renderers recurse, so they judge 40
        text = prefix * depth + tail
        one_shot = Sanitizer()(text)
        stream = StreamSanitizer(Sanitizer())
        streamed = "".join(stream.feed(prefix) for _ in range(depth)) + stream.feed(tail) + stream.flush()
        whole = StreamSanitizer(Sanitizer())
        at_once = whole.feed(text) + whole.flush()
    for out in (one_shot, streamed, at_once):
        assert not violations(out), (prefix, tail, violations(out))
