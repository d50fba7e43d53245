"""What counts as hidden in HTML: text a reader does not see but a model would.

Hidden text is the classic carrier of indirect prompt injection (white-on-white,
``display:none``, zero-size fonts, off-screen positioning), so it is dropped at load
time and the section it sat in is flagged ``hidden_html``. Visibility is computed from
the styles that apply to each element (``ingest.prepare.loaders.css``): inline ``style``,
``<style>`` rules matched by selector, presentational attributes (``<font color>``,
``bgcolor``), and what the element inherits (colour, background, font size).
"""

from __future__ import annotations

from typing import Any

import soupsieve

from ingest.model import FileRejected
from ingest.prepare.loaders.css import INLINE, Context, Decl, Rule, Specificity, apply, stylesheet_rules
from ingest.prepare.loaders.css import declarations as parse_declarations
from ingest.prepare.loaders.css import winning as cascade

# Dropped silently: never rendered as text (or not text at all).
NON_TEXT_TAGS = frozenset(
    {"script", "style", "noscript", "template", "head", "iframe", "object", "embed", "svg", "canvas", "math"}
)
# Below this many characters of dropped hidden text, no flag (icons, spacers).
FLAG_MIN_CHARS = 12
# Selector matches per document (candidate rules summed over elements): past this, a file is
# refused rather than checked without bound.
MAX_MATCHES = 100_000
_ATTRIBUTE: Specificity = (0, 0, 0)  # presentational attributes lose to every rule


def attrs_hide(name: str, attrs: dict[str, Any]) -> bool:
    """The ``hidden`` attribute, ``aria-hidden="true"``, a closed ``<dialog>``."""
    if "hidden" in attrs:
        return True
    if str(attrs.get("aria-hidden", "")).strip().lower() == "true":
        return True
    return name == "dialog" and "open" not in attrs


def _attribute_decls(attrs: dict[str, Any]) -> list[tuple[Specificity, int, Decl]]:
    out: list[tuple[Specificity, int, Decl]] = []
    for attr, prop in (("color", "color"), ("bgcolor", "background-color")):
        value = attrs.get(attr)
        if isinstance(value, str):
            out.extend((_ATTRIBUTE, -1, d) for d in parse_declarations(f"{prop}: {value}"))
    return out


def inline_hides(style: str, ctx: Context | None = None) -> bool:
    """True when an inline style alone hides its element, on a default page (Markdown's inline HTML)."""
    ctx = ctx or Context()
    hidden, inner = apply(cascade([(INLINE, 0, d) for d in parse_declarations(style)]), ctx)
    return hidden or inner.text_invisible


class Styles:
    """The stylesheets of one document, indexed by the key of each rule's rightmost compound."""

    def __init__(self, css_texts: list[str]) -> None:
        self._by_key: dict[tuple[str, str], list[Rule]] = {}
        self._universal: list[Rule] = []
        self._matches = 0
        order = 0
        for css in css_texts:
            for rule in stylesheet_rules(css, order):
                order = rule.order + 1
                try:
                    rule.compiled = soupsieve.compile(rule.selector)
                except Exception:  # noqa: S112  # selectors soupsieve cannot read hide nothing we can find
                    continue
                if rule.key is None:
                    self._universal.append(rule)
                else:
                    self._by_key.setdefault(rule.key, []).append(rule)

    def _candidates(self, el: Any) -> list[Rule]:
        keys: list[tuple[str, str]] = [("tag", (el.name or "").lower())]
        el_id = el.get("id")
        if isinstance(el_id, str):
            keys.append(("id", el_id))
        classes = el.get("class") or []
        keys.extend(("class", c) for c in (classes if isinstance(classes, list) else str(classes).split()))
        found = [r for k in keys for r in self._by_key.get(k, ())]
        return found + self._universal

    def visibility(self, el: Any, ctx: Context) -> tuple[bool, Context]:
        """(hidden, the context its children inherit) for the element ``el``."""
        name = (el.name or "").lower()
        attrs = dict(el.attrs)
        if attrs_hide(name, attrs):
            return True, ctx
        found: list[tuple[Specificity, int, Decl]] = _attribute_decls(attrs)
        candidates = self._candidates(el)
        self._matches += len(candidates)
        if self._matches > MAX_MATCHES:
            raise FileRejected(f"HTML styles too complex to check for hidden text (> {MAX_MATCHES} selector matches)")
        for rule in candidates:
            if rule.compiled.match(el):
                found.extend((rule.specificity, rule.order, d) for d in rule.decls)
        style = attrs.get("style")
        if isinstance(style, str) and style.strip():
            found.extend((INLINE, 0, d) for d in parse_declarations(style))
        if not found:
            return False, ctx
        return apply(cascade(found), ctx)
