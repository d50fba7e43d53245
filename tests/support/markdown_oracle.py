"""The differential oracle: render sanitised markdown with each common renderer and check the HTML.

Clients render answers with whatever they have, so the matrix is the renderers Python web apps
and chat front ends use: markdown-it-py (CommonMark, raw HTML on; and with linkify, which links
bare domains such as ``evil.example/x`` and ``//evil.example``), cmark-gfm (GitHub's C renderer,
with its autolink, table and strikethrough extensions, raw HTML on), mistune, commonmark.py,
Python-Markdown (default and with ``extra``) and markdown2 (default and with fenced code blocks).
None of them is told to escape HTML: each passes raw HTML through, as it does by default.

What must hold in every one: no image, no raw HTML element (so no ``<script>`` or ``<iframe>``),
no event handler or ``src``/``style`` attribute, and every link goes to an allowlisted host over
http(s) (so no ``javascript:`` or ``data:`` URL). The host check here is deliberately not the
sanitiser's own (``docquery.rag.safe_url``).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Callable
from urllib.parse import urlsplit

import cmarkgfm
import commonmark
import markdown as python_markdown
import markdown2
import mistune
from bs4 import BeautifulSoup
from cmarkgfm.cmark import Options
from markdown_it import MarkdownIt

# Elements the renderers produce from markdown syntax alone (anything else came from raw HTML).
_MARKDOWN_TAGS = {
    "p", "a", "code", "pre", "em", "strong", "ul", "ol", "li", "blockquote", "hr", "br", "del",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "input",
    "dl", "dt", "dd",  # Python-Markdown's extra: a line "term" then ": definition"
    "section", "sup", "div",  # footnotes (mistune, Python-Markdown's extra), from [^n] syntax alone
}  # fmt: skip
_MD = MarkdownIt("commonmark")
_ALIGN = re.compile(r"text-align: (?:left|center|right);?\Z")
# mistune.html's own plugins, plus "url", which links bare URLs as GFM does.
_MISTUNE = mistune.create_markdown(escape=False, plugins=["strikethrough", "footnotes", "table", "url"])

RENDERERS: dict[str, Callable[[str], str]] = {
    "markdown-it": _MD.render,
    "cmark-gfm": lambda t: cmarkgfm.github_flavored_markdown_to_html(t, options=Options.CMARK_OPT_UNSAFE),
    "mistune": lambda t: str(_MISTUNE(t)),
    "commonmark.py": commonmark.commonmark,
    "python-markdown": python_markdown.markdown,
    "python-markdown+extra": lambda t: python_markdown.markdown(t, extensions=["extra"]),
    "markdown2": markdown2.markdown,
    "markdown2+fenced": lambda t: markdown2.markdown(t, extras=["fenced-code-blocks"]),
}
# markdown-it-py's linkify rule needs linkify-it-py, a dev dependency: in the matrix wherever installed.
LINKIFY = importlib.util.find_spec("linkify_it") is not None
if LINKIFY:
    RENDERERS["markdown-it+linkify"] = MarkdownIt("commonmark", {"linkify": True}).enable("linkify").render


def renderings(markdown: str) -> dict[str, str]:
    return {name: render(markdown) for name, render in RENDERERS.items()}


def violations(markdown: str, allowed_hosts: tuple[str, ...] = (), *, linkify: bool = True) -> list[str]:
    """``linkify=False`` for plain-text fields (titles, sources): they are not markdown, so they keep
    domain-shaped names as written, which only a linkify renderer would link."""
    # Most stream splits give the same output: each distinct one is rendered once.
    return list(_violations(markdown, allowed_hosts, linkify))


@functools.lru_cache(maxsize=16384)
def _violations(markdown: str, allowed_hosts: tuple[str, ...], linkify: bool) -> tuple[str, ...]:
    found: list[str] = []
    for name, render in RENDERERS.items():
        if linkify or name != "markdown-it+linkify":
            found += html_violations(name, render(markdown), allowed_hosts)
    return tuple(found)


def html_violations(name: str, html: str, allowed_hosts: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(True):
        if tag.name == "img":
            found.append(f"{name}: image {tag}")
        elif tag.name not in _MARKDOWN_TAGS:
            found.append(f"{name}: raw HTML <{tag.name}>")
        elif tag.name == "input" and tag.get("type") != "checkbox":
            found.append(f"{name}: raw HTML {tag}")
        # Python-Markdown's tables align cells with a style attribute: that one alone is markdown's.
        if tag.name in ("th", "td") and _ALIGN.match(str(tag.get("style", "text-align: left;"))):
            del tag["style"]
        if any(a.lower().startswith("on") or a in ("src", "style", "srcset", "formaction") for a in tag.attrs):
            found.append(f"{name}: attribute on <{tag.name}>")
        if tag.name != "a" and "href" in tag.attrs:
            found.append(f"{name}: href on <{tag.name}>")
        if tag.name == "a" and not _allowed(str(tag.get("href", "")), allowed_hosts):
            found.append(f"{name}: link to {tag.get('href')!r}")
    if re.search(r"<!--|<\?|<!\[CDATA", html):
        found.append(f"{name}: raw HTML comment or instruction")
    return found


def _allowed(href: str, allowed_hosts: tuple[str, ...]) -> bool:
    if not re.match(r"(?i)^https?://[a-z0-9.-]+(?::\d+)?(?:[/?#]|$)", href):
        return False
    host = (urlsplit(href).hostname or "").rstrip(".")
    return any(host == a or host.endswith("." + a) for a in allowed_hosts)
