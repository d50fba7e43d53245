"""``ingest.report.terminal.safe`` leaves nothing a terminal would act on, and loses nothing."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.report.terminal import safe

_UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs", "Cn", "Co"}
_ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[nrt\\])")
_SHORT = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: _SHORT.get(m.group(0)[1]) or chr(int(m.group(0)[2:], 16)), text)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=40) | st.binary(max_size=40).map(
    lambda b: b.decode("utf-8", "surrogateescape")))  # fmt: skip
def test_safe_output_has_no_control_format_or_separator_character_and_round_trips(text: str) -> None:
    out = safe(text)
    assert not any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in out)
    assert "\n" not in out and "\x1b" not in out
    assert _unescape(out) == text, "escaping is reversible, so two names never print the same"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain name.txt", "plain name.txt"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("a\nb", "a\\nb"),
        ("a\rb", "a\\rb"),
        ("tab\there", "tab\\there"),
        ("\x9b2J", "\\x9b2J"),
        ("rlo\u202egnp.exe", "rlo\\u202egnp.exe"),
        ("zw\u200bsp", "zw\\u200bsp"),
        ("line\u2028sep", "line\\u2028sep"),
        ("back\\slash", "back\\\\slash"),
        ("bad\udcffbyte", "bad\\udcffbyte"),
        ("caf\u00e9 \u6f22\u5b57 \U0001f600", "caf\u00e9 \u6f22\u5b57 \U0001f600"),
        ("nbsp\u00a0kept", "nbsp\u00a0kept"),
    ],
)
def test_known_sequences(raw: str, shown: str) -> None:
    assert safe(raw) == shown
