"""``answer_html``: the sanitised Markdown answer rendered as HTML on the server, for clients that want HTML.

Two independent layers, so one mistake is not enough:

1. markdown-it-py in CommonMark mode with raw HTML off renders the (already sanitised) Markdown: a
   ``<`` in the text comes out as ``&lt;``;
2. nh3 (ammonia) then keeps only an allowlist: block and inline text elements, no image, no script,
   no ``style`` or event attribute, no class; a link keeps its ``href`` only when it is ``http(s)``
   to an allowlisted host (``api.link_allowlist``, the sanitiser's own host rule), and gets
   ``rel="noopener noreferrer"``. A link to any other host loses its ``href`` and stays as its text.
"""

from __future__ import annotations

from collections.abc import Iterable

import nh3
from markdown_it import MarkdownIt

from docquery.rag.safe_url import HostAllowlist

TAGS = frozenset(
    {"p", "br", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote", "hr", "a"}
    | {"h1", "h2", "h3", "h4", "h5", "h6"}
)
ATTRIBUTES = {"a": {"href"}, "ol": {"start"}}
# Removed with their content, not only their tags: what is inside them is never text for a reader.
DROPPED_WITH_CONTENT = frozenset({"script", "style", "template", "iframe", "object", "svg", "math", "noscript"})


class AnswerHtml:
    """Markdown -> allowlisted HTML. One parser per instance (no module state)."""

    def __init__(self, link_allowlist: Iterable[str] = ()) -> None:
        self._allow = HostAllowlist(link_allowlist)
        self._md = MarkdownIt("commonmark", {"html": False})

    def __call__(self, markdown: str) -> str:
        return self.clean(self._md.render(markdown))

    def clean(self, html: str) -> str:
        """The allowlist alone (the second layer), applied to any HTML."""
        return nh3.clean(
            html,
            tags=set(TAGS),
            clean_content_tags=set(DROPPED_WITH_CONTENT),
            attributes={k: set(v) for k, v in ATTRIBUTES.items()},
            attribute_filter=self._attribute,
            url_schemes={"http", "https"},
            link_rel="noopener noreferrer",
            strip_comments=True,
        )

    def _attribute(self, tag: str, attribute: str, value: str) -> str | None:
        if tag == "a" and attribute == "href":
            return value if self._allow.allows(value) else None
        if tag == "ol" and attribute == "start":
            return value if value.isdigit() and len(value) <= 9 else None
        return value  # only what ATTRIBUTES lets through reaches here, and the rel nh3 adds
