"""What counts as hidden in HTML: text a reader does not see but a model would.

Hidden text is the classic carrier of indirect prompt injection (white-on-white,
``display:none``, zero-size fonts), so it is dropped at load time and the
section it sat in is flagged ``hidden_html``.
"""

from __future__ import annotations

import re

# Dropped silently: never rendered as text (or not text at all).
NON_TEXT_TAGS = frozenset(
    {"script", "style", "noscript", "template", "head", "iframe", "object", "embed", "svg", "canvas", "math"}
)
# Below this many characters of dropped hidden text, no flag (icons, spacers).
FLAG_MIN_CHARS = 12

_ZERO = r"(?:0+(?:\.0+)?|\.0+)(?:px|pt|em|rem|%|vh|vw|ex|ch)?"
_HIDING = [
    re.compile(r"display\s*:\s*none"),
    re.compile(r"visibility\s*:\s*(?:hidden|collapse)"),
    re.compile(rf"font-size\s*:\s*{_ZERO}\s*(?:!important)?\s*(?:;|$)"),
    re.compile(rf"(?<![-\w])opacity\s*:\s*{_ZERO}\s*(?:!important)?\s*(?:;|$)"),
    re.compile(r"(?<![-\w])color\s*:\s*(?:transparent|rgba\([^)]*,\s*0(?:\.0+)?\s*\))"),
    re.compile(r"clip\s*:\s*rect\(\s*0[a-z]*\s*,?\s*0[a-z]*\s*,?\s*0[a-z]*\s*,?\s*0[a-z]*\s*\)"),
    re.compile(r"clip-path\s*:\s*(?:inset\(\s*(?:50|100)%|circle\(\s*0)"),
    re.compile(r"text-indent\s*:\s*-\d{3,}"),
    re.compile(r"(?<![-\w])(?:left|top|right)\s*:\s*-\d{4,}"),
    re.compile(r"transform\s*:\s*scale\(\s*0(?:\.0+)?\s*\)"),
    re.compile(rf"(?<![-\w])(?:max-)?(?:height|width)\s*:\s*{_ZERO}\s*(?:!important)?\s*(?:;|$)"),
]
_COLOR = re.compile(r"(?<![-\w])color\s*:\s*([^;]+)")
_BACKGROUND = re.compile(r"background(?:-color)?\s*:\s*([^;]+)")


def style_hides(style: str) -> bool:
    """True when an inline style (or a CSS rule body) makes its element invisible."""
    s = style.lower()
    if any(p.search(s) for p in _HIDING):
        # width/height 0 only hides together with overflow:hidden (else content spills out visibly).
        sized = re.search(rf"(?<![-\w])(?:max-)?(?:height|width)\s*:\s*{_ZERO}", s)
        others = [p for p in _HIDING[:-1] if p.search(s)]
        if others or (sized and "overflow" in s and "hidden" in s):
            return True
    fg, bg = _COLOR.search(s), _BACKGROUND.search(s)
    return bool(fg and bg and _norm_color(fg.group(1)) == _norm_color(bg.group(1)))


def _norm_color(value: str) -> str:
    v = value.replace("!important", "").strip().replace(" ", "")
    named = {"white": "#ffffff", "black": "#000000", "#fff": "#ffffff", "#000": "#000000"}
    return named.get(v, v)


def attrs_hide(attrs: dict[str, object]) -> bool:
    """The ``hidden`` attribute, ``aria-hidden="true"``, or a hiding inline style."""
    if "hidden" in attrs:
        return True
    if str(attrs.get("aria-hidden", "")).strip().lower() == "true":
        return True
    style = attrs.get("style")
    return isinstance(style, str) and style_hides(style)


_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def hiding_selectors(css: str) -> list[str]:
    """Selectors of a stylesheet whose rule hides the element (``.x{display:none}``)."""
    out: list[str] = []
    for selectors, body in _RULE.findall(_COMMENT.sub("", css)):
        if style_hides(body):
            out.extend(sel.strip() for sel in selectors.split(",") if sel.strip() and "@" not in sel)
    return out
