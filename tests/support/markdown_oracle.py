"""The differential oracle: render sanitised markdown with two independent renderers and check the HTML.

markdown-it-py (CommonMark, raw HTML on) and cmark-gfm (GitHub's C renderer, with its
autolink, table and strikethrough extensions, raw HTML on). What must hold in both: no
image, no raw HTML element, and every link goes to an allowlisted host over http(s).
The host check here is deliberately not the sanitiser's own (``docquery.rag.safe_url``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import cmarkgfm
from bs4 import BeautifulSoup
from cmarkgfm.cmark import Options
from markdown_it import MarkdownIt

# Elements the two renderers produce from markdown syntax alone (anything else came from raw HTML).
_MARKDOWN_TAGS = {
    "p", "a", "code", "pre", "em", "strong", "ul", "ol", "li", "blockquote", "hr", "br", "del",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "input",
}  # fmt: skip
_MD = MarkdownIt("commonmark")


def renderings(markdown: str) -> dict[str, str]:
    return {
        "markdown-it": _MD.render(markdown),
        "cmark-gfm": cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE),
    }


def violations(markdown: str, allowed_hosts: tuple[str, ...] = ()) -> list[str]:
    found: list[str] = []
    for name, html in renderings(markdown).items():
        soup = BeautifulSoup(html, "html.parser")
        for tag in soup.find_all(True):
            if tag.name == "img":
                found.append(f"{name}: image {tag}")
            elif tag.name not in _MARKDOWN_TAGS:
                found.append(f"{name}: raw HTML <{tag.name}>")
            elif tag.name == "input" and tag.get("type") != "checkbox":
                found.append(f"{name}: raw HTML {tag}")
            if tag.name != "a" and any(a.startswith("on") or a in ("src", "href", "style") for a in tag.attrs):
                found.append(f"{name}: attribute on <{tag.name}>")
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
