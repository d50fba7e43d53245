"""The main content of an HTML page: the element that holds it, and the site furniture inside it.

Documentation generators wrap each page in navigation, sidebars, breadcrumbs, headers,
footers, tables of contents, "edit/show source" links and permalink marks. Indexed, that
furniture is a quarter of the chunks and answers nothing. The main element is found by the
generators' own containers (Sphinx, MkDocs, Javadoc, Docusaurus, Confluence and SharePoint
exports), then the semantic ``<main>``/``<article>``; failing those, trafilatura's extractor
says which text is content and the smallest element holding nearly all of it is taken.

Nothing here changes the tree: the caller skips what this names, and computes visibility on
the page as parsed, so a structural selector (``:nth-child``) still hides what it hid and
extraction can never bring hidden text back.
"""

from __future__ import annotations

import logging
import re

from bs4 import BeautifulSoup, Tag

# The generators' content containers, most specific first, then the semantic elements:
# (tag or None for any, attribute or None, a value it holds or None for any).
_MAIN: tuple[tuple[str | None, str | None, str | None], ...] = (
    ("article", "class", "md-content__inner"),  # MkDocs Material
    ("div", "class", "theme-doc-markdown"),  # Docusaurus
    ("article", "class", "bd-article"),  # Sphinx, PyData theme
    ("div", "itemprop", "articleBody"),  # Sphinx, Read the Docs theme
    ("div", "class", "body"),  # Sphinx, classic and Alabaster themes
    ("div", "id", "main-content"),  # Confluence export
    ("div", "id", "DeltaPlaceHolderMain"),  # SharePoint (classic) export
    ("div", "data-automation-id", "CanvasLayout"),  # SharePoint (modern) export
    ("div", "class", "contentContainer"),  # Javadoc before 11
    ("main", None, None),  # Javadoc 11+, most hand-written HTML5 pages
    (None, "role", "main"),  # MkDocs' own theme
    ("article", None, None),
    ("div", "id", "content"),
)


def _holds(tag: Tag, rule: tuple[str | None, str | None, str | None]) -> bool:
    name, attr, value = rule
    if name is not None and (tag.name or "").lower() != name:
        return False
    if attr is None:
        return True
    got = tag.get(attr)
    if got is None:
        return False
    values = got if isinstance(got, list) else str(got).split() if attr == "class" else [str(got)]
    return value is None or value in values


# Words of class and id values that name furniture ("wy-breadcrumbs", "md-sidebar", "subNav").
_FURNITURE_WORDS = frozenset(
    {
        *(
            "nav",
            "navbar",
            "navigation",
            "subnav",
            "topnav",
            "bottomnav",
            "navlist",
            "sidenav",
            "quicklaunch",
            "navheader",
            "navfooter",
        ),
        *("breadcrumb", "breadcrumbs", "sidebar", "sphinxsidebar", "sphinxsidebarwrapper", "toc", "tocs"),
        *("footer", "headerlink", "permalink", "pagination", "related", "sourcelink", "skiplink", "suitebar"),
        *("topbar", "legalcopy", "editlink", "editthispage"),
    }
)
_WORD = re.compile(r"\w+")
_WORD_SPLIT = re.compile(r"[-_\s]+|(?<=[a-z])(?=[A-Z])")
_FURNITURE_TAGS = frozenset({"nav", "aside", "footer"})
_FURNITURE_ROLES = frozenset({"navigation", "contentinfo", "complementary", "search", "doc-toc", "banner"})
# Elements that are furniture only when they hold no heading (Docusaurus' <header><h1>).
_HEADED = frozenset({"header"})
_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# Link texts that are site actions, not content.
_ACTION_LINKS = re.compile(
    r"(?:edit|view|show|improve|report|suggest)\b.{0,24}\b(?:page|source|github|gitlab|bug|issue|edit|doc)s?"
    r"|(?:previous|next)(?: page| topic)?|back to top|skip to (?:main )?content",
    re.IGNORECASE,
)
_GLYPHS_ONLY = re.compile(r"^[\W_]*$")
# Sphinx's local contents (``.. contents::``) and MkDocs/Docusaurus tables of contents.
_TOC_CLASSES = frozenset({"contents", "table-of-contents", "toc-wrapper", "md-nav", "theme-doc-toc-mobile"})
# A furniture match holding more than this share of the root's text is a wrapper, not furniture.
_WRAPPER_SHARE = 0.5
# trafilatura's text is located in the smallest element holding this share of its words.
_COVER_SHARE = 0.9
# Past this many candidate elements a page is not searched for the one holding that text.
_MAX_CONTAINERS = 5_000


def candidates(soup: BeautifulSoup) -> list[Tag]:
    """Main-content elements named by the generators' containers and the semantic tags, in order
    (the first of each kind in the document; one pass over the tree)."""
    first: list[Tag | None] = [None] * len(_MAIN)
    for el in soup.find_all(True):
        for i, rule in enumerate(_MAIN):
            if first[i] is None and _holds(el, rule):
                first[i] = el
    out: list[Tag] = []
    for found in first:
        if found is not None and all(found is not t for t in out) and found.get_text().strip():
            out.append(found)
    return out


def located(html: str, body: Tag) -> Tag | None:
    """The smallest element under ``body`` holding nearly all the words trafilatura extracts as
    content; None when it finds none or only the body holds them."""
    import trafilatura  # imported here: seconds of import, only for pages no container names

    # Its log lines judge the page ("not valid HTML", "discarding data") and may quote it: logs carry no
    # document content, and the loader reports what matters (a page read whole is counted).
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL + 1)

    text = trafilatura.extract(
        html, favor_recall=True, include_tables=True, include_comments=False, deduplicate=False, fast=True
    )
    words = set(_WORD.findall(text or ""))
    if not words:
        return None
    containers = body.find_all(["div", "section", "article", "main", "td"], limit=_MAX_CONTAINERS + 1)
    if len(containers) > _MAX_CONTAINERS:
        return None  # each is measured by its text: quadratic in nested markup, so the page is read whole
    best: Tag | None = None
    best_len = len(body.get_text(" "))
    for el in containers:
        own = el.get_text(" ")
        if len(own) >= best_len:
            continue
        if len(words.intersection(_WORD.findall(own))) >= _COVER_SHARE * len(words):
            best, best_len = el, len(own)
    return best


def _words(tag: Tag) -> set[str]:
    out: set[str] = set()
    for attr in ("class", "id"):
        value = tag.get(attr)
        values = value if isinstance(value, list) else [value] if isinstance(value, str) else []
        for v in values:
            out.update(w.lower() for w in _WORD_SPLIT.split(v) if w)
    return out


def _classes(tag: Tag) -> set[str]:
    value = tag.get("class")
    return set(value) if isinstance(value, list) else set(str(value or "").split())


def _is_furniture(tag: Tag, name: str) -> bool:
    role = str(tag.get("role") or "").strip().lower()
    if name in _FURNITURE_TAGS or role in _FURNITURE_ROLES or _classes(tag) & _TOC_CLASSES:
        return name not in _HEADED or tag.find(_HEADING_TAGS) is None
    if name in _HEADED:
        return tag.find(_HEADING_TAGS) is None
    if name == "a":
        text = " ".join(tag.get_text().split())
        href = tag.get("href")
        if isinstance(href, str) and href.startswith("#") and _GLYPHS_ONLY.match(text):
            return True  # a permalink mark (Sphinx's ¶, MkDocs' #)
        return bool(text) and _ACTION_LINKS.fullmatch(text) is not None
    return bool(_words(tag) & _FURNITURE_WORDS)


def furniture(root: Tag) -> set[int]:
    """``id()`` of each element under ``root`` that is site furniture (the walk skips them)."""
    total = max(1, len(root.get_text()))
    out: set[int] = set()
    for tag in root.find_all(True):
        if any(id(p) in out for p in tag.parents):
            continue
        name = (tag.name or "").lower()
        if _is_furniture(tag, name) and (name == "a" or len(tag.get_text()) <= _WRAPPER_SHARE * total):
            out.add(id(tag))
    return out
