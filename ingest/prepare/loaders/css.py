"""Computed visibility from CSS, through tinycss2 (a CSS Syntax Level 3 parser).

Threat: text a reader never sees but a model reads (indirect prompt injection). An element is
hidden when the declarations that win for it (inline style over ``<style>`` rules, by
``!important``, then specificity, then order) make it invisible, or when its text colour equals
the background it inherits. Comments and CSS escapes (``display:/**/none``, ``\\6e one``) are
handled by the tokenizer, not by patterns. Everything here is linear in the input; selector
matching is bounded by ``MAX_MATCHES`` (a file past it is refused, never parsed without bound).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import tinycss2
from tinycss2 import color3

RGBA = tuple[float, float, float, float]
WHITE: RGBA = (1.0, 1.0, 1.0, 1.0)
BLACK: RGBA = (0.0, 0.0, 0.0, 1.0)
Specificity = tuple[int, int, int]

# The properties that can hide text; rules with none of them are dropped when parsed.
RELEVANT = frozenset(
    {
        *("display", "visibility", "opacity", "font-size", "color", "background", "background-color"),
        *("transform", "scale", "translate", "left", "right", "top", "bottom", "margin-left", "margin-top"),
        *("text-indent", "clip", "clip-path", "width", "height", "max-width", "max-height", "overflow"),
        *("overflow-x", "overflow-y", "content-visibility", "-webkit-text-fill-color"),
    }
)
INLINE: Specificity = (1_000, 0, 0)  # above every selector
MIN_FONT_PX = 2.0
MIN_OPACITY = 0.05
MIN_SCALE = 0.05
OFF_SCREEN_PX = 1_000.0
_ABS_PX = {"px": 1.0, "pt": 4 / 3, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "q": 96 / 101.6}
_VIEWPORT = {"vw": 10.0, "vh": 10.0, "vmin": 10.0, "vmax": 10.0}  # a 1000 px viewport
_FONT_KEYWORDS = {"xx-small": 9.0, "x-small": 10.0, "small": 13.0, "medium": 16.0, "large": 18.0}
_DYNAMIC = ("hover", "focus", "active", "visited", "target", "focus-within", "focus-visible", "checked")


@dataclass(frozen=True)
class Decl:
    name: str
    value: tuple[Any, ...]  # tinycss2 component values, without whitespace and comments
    important: bool


@dataclass(frozen=True)
class Context:
    """What an element inherits: text colour, the background it is drawn on, font size."""

    color: RGBA = BLACK
    background: RGBA = WHITE
    font_px: float = 16.0

    @property
    def text_invisible(self) -> bool:
        return self.color[3] <= MIN_OPACITY or same_color(self.color, self.background)


@dataclass
class Rule:
    selector: str
    specificity: Specificity
    order: int
    decls: tuple[Decl, ...]
    key: tuple[str, str] | None = None  # ("id"|"class"|"tag", name) of the rightmost compound
    compiled: Any = field(default=None, repr=False)


def _clean(tokens: Any) -> tuple[Any, ...]:
    return tuple(t for t in tokens if t.type not in ("whitespace", "comment"))


def declarations(text_or_tokens: Any) -> list[Decl]:
    out = []
    for item in tinycss2.parse_declaration_list(text_or_tokens, skip_comments=True, skip_whitespace=True):
        if item.type == "declaration":
            out.append(Decl(item.lower_name, _clean(item.value), bool(item.important)))
    return out


def stylesheet_rules(css: str, start_order: int = 0) -> list[Rule]:
    """The style rules of a stylesheet that can hide text, one per selector, with specificity."""
    out: list[Rule] = []

    def visit(items: Any) -> None:
        for item in items:
            if item.type == "at-rule" and item.lower_at_keyword in ("media", "supports") and item.content:
                if item.lower_at_keyword == "media" and "print" in tinycss2.serialize(item.prelude).lower():
                    continue  # print-only rules do not hide anything on screen
                visit(tinycss2.parse_rule_list(item.content, skip_comments=True, skip_whitespace=True))
            elif item.type == "qualified-rule":
                decls = tuple(d for d in declarations(item.content) if d.name in RELEVANT)
                if decls:
                    for selector in _split_selectors(item.prelude):
                        rule = _rule(selector, decls, start_order + len(out))
                        if rule is not None:
                            out.append(rule)

    visit(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True))
    return out


def _split_selectors(prelude: Any) -> list[list[Any]]:
    parts: list[list[Any]] = [[]]
    for token in prelude:
        if token.type == "literal" and token.value == ",":
            parts.append([])
        elif token.type != "comment":
            parts[-1].append(token)
    return [p for p in parts if any(t.type != "whitespace" for t in p)]


def _rule(tokens: list[Any], decls: tuple[Decl, ...], order: int) -> Rule | None:
    text = tinycss2.serialize(tokens).strip()
    lowered = text.lower()
    if "::" in text or any(f":{p}" in lowered for p in (*_DYNAMIC, "before", "after")):
        return None  # pseudo-elements are not in the document; dynamic states are not at rest
    a = b = c = 0
    previous: Any = None
    for token in tokens:
        if token.type == "hash":
            a += 1
        elif token.type == "[] block" or (token.type in ("ident", "function") and _after(previous, (".", ":"))):
            b += 1
        elif token.type == "ident":
            c += 1
        previous = token
    return Rule(text, (a, b, c), order, decls, _key(tokens))


def _after(previous: Any, literals: tuple[str, ...]) -> bool:
    return previous is not None and previous.type == "literal" and previous.value in literals


def _key(tokens: list[Any]) -> tuple[str, str] | None:
    """The rightmost compound's id, else a class, else its type: only elements with it can match."""
    compound: list[Any] = []
    for token in reversed(tokens):
        if token.type == "whitespace" or (token.type == "literal" and token.value in (">", "+", "~")):
            if compound:
                break
            continue
        compound.insert(0, token)
    tag = None
    klass = None
    for i, token in enumerate(compound):
        if token.type == "hash":
            return ("id", token.value)
        if token.type == "ident" and i and compound[i - 1].type == "literal" and compound[i - 1].value == ".":
            klass = klass or token.value
        elif token.type == "ident" and i == 0:
            tag = token.lower_value
    if klass:
        return ("class", klass)
    return ("tag", tag) if tag else None


def parse_color(token: Any) -> RGBA | None:
    got = color3.parse_color(token)
    if got is None or got == "currentColor":
        return None
    return (got.red, got.green, got.blue, got.alpha)


def same_color(a: RGBA, b: RGBA) -> bool:
    return all(abs(x - y) <= 8 / 255 for x, y in zip(a[:3], b[:3], strict=True))


def length_px(token: Any, font_px: float, percent_of: float = OFF_SCREEN_PX) -> float | None:
    if token.type in ("number", "percentage"):
        scale = 1.0 if token.type == "number" else percent_of / 100
        return float(token.value) * scale
    if token.type != "dimension":
        return None
    unit = token.lower_unit
    relative = {"em": font_px, "lh": font_px, "rem": 16.0, "rlh": 16.0, "ex": font_px / 2, "ch": font_px / 2}
    factor = _ABS_PX.get(unit) or relative.get(unit) or _VIEWPORT.get(unit)
    return float(token.value) * factor if factor is not None else None


def _ident(value: tuple[Any, ...]) -> str:
    return str(value[0].lower_value) if value and value[0].type == "ident" else ""


def _args(token: Any) -> list[Any]:
    return [t for t in _clean(token.arguments) if not (t.type == "literal" and t.value in (",", "/"))]


def _number(token: Any) -> float | None:
    if token.type == "number":
        return float(token.value)
    return float(token.value) / 100 if token.type == "percentage" else None


def font_px(value: tuple[Any, ...], parent_px: float) -> float | None:
    if not value:
        return None
    token = value[0]
    if token.type == "ident":
        kw = token.lower_value
        if kw in _FONT_KEYWORDS:
            return _FONT_KEYWORDS[kw]
        return {"smaller": parent_px / 1.2, "larger": parent_px * 1.2}.get(kw)
    return length_px(token, parent_px, percent_of=parent_px)


def _transform_hides(value: tuple[Any, ...], px: float) -> bool:
    for token in value:
        if token.type != "function":
            continue
        name, args = token.lower_name, _args(token)
        numbers = [n for n in map(_number, args) if n is not None]
        if name.startswith("scale") and any(abs(n) < MIN_SCALE for n in numbers):
            return True
        if name == "matrix" and len(numbers) == 6:
            a, b, c, d, e, f = numbers
            if abs(a * d - b * c) < MIN_SCALE**2 or max(abs(e), abs(f)) >= OFF_SCREEN_PX:
                return True
        if name.startswith("translate"):
            shifts = [length_px(t, px) for t in args]
            if any(s is not None and abs(s) >= OFF_SCREEN_PX for s in shifts):
                return True
    return False


def _clip_hides(name: str, value: tuple[Any, ...], px: float) -> bool:
    shape = next((t for t in value if t.type == "function"), None)
    if shape is None:
        return False
    lengths = [length_px(t, px, percent_of=100.0) for t in _args(shape)]
    known = [n for n in lengths if n is not None]
    fname = shape.lower_name
    if name == "clip" and fname == "rect" and len(known) == 4:
        top, right, bottom, left = known
        return bottom - top <= 1 or right - left <= 1
    if fname == "inset":
        return bool(known) and known[0] >= 50  # insets of half the box from each side leave nothing
    if fname in ("circle", "ellipse"):
        return bool(known) and min(known[:2]) <= 1
    if fname == "polygon":
        return len(set(known)) <= 1
    return False


def _display(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return _ident(value) == "none"


def _visibility(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return _ident(value) in ("hidden", "collapse")


def _content_visibility(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return _ident(value) == "hidden"


def _opacity(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    n = _number(value[0]) if value else None
    return n is not None and n <= MIN_OPACITY


def _scale(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return any((n := _number(t)) is not None and abs(n) < MIN_SCALE for t in value)


def _translate(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return any((s := length_px(t, px)) is not None and abs(s) >= OFF_SCREEN_PX for t in value)


def _transform(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return _transform_hides(value, px)


def _offset(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    shift = length_px(value[0], px) if value else None
    return shift is not None and (shift <= -OFF_SCREEN_PX or shift >= 5 * OFF_SCREEN_PX)


def _clip(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return _clip_hides("clip", value, px)


def _clip_path(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    return _clip_hides("clip-path", value, px)


def _size(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    size = length_px(value[0], px) if value else None
    overflow = [_ident(props[o].value) for o in ("overflow", "overflow-x", "overflow-y") if o in props]
    return size is not None and size <= 1 and any(o in ("hidden", "clip") for o in overflow)


def _fill_color(value: tuple[Any, ...], props: dict[str, Decl], px: float) -> bool:
    color = parse_color(value[0]) if value else None
    return color is not None and color[3] <= MIN_OPACITY


_HIDES = {
    "display": _display,
    "visibility": _visibility,
    "content-visibility": _content_visibility,
    "opacity": _opacity,
    "scale": _scale,
    "translate": _translate,
    "transform": _transform,
    **dict.fromkeys(("left", "top", "right", "bottom", "margin-left", "margin-top", "text-indent"), _offset),
    "clip": _clip,
    "clip-path": _clip_path,
    **dict.fromkeys(("width", "height", "max-width", "max-height"), _size),
    "-webkit-text-fill-color": _fill_color,
}


def decl_hides(d: Decl, props: dict[str, Decl], px: float) -> bool:
    """Whether one winning declaration makes its element (and everything in it) invisible."""
    check = _HIDES.get(d.name)
    return check is not None and check(d.value, props, px)


def background_of(props: dict[str, Decl]) -> RGBA | None:
    for name in ("background-color", "background"):
        if name in props:
            for token in props[name].value:
                color = parse_color(token)
                if color is not None:
                    return color
    return None


def apply(props: dict[str, Decl], ctx: Context) -> tuple[bool, Context]:
    """(hidden, what the element's children inherit) for an element's winning declarations."""
    px = ctx.font_px
    if "font-size" in props:
        size = font_px(props["font-size"].value, ctx.font_px)
        px = size if size is not None else px
    if px < MIN_FONT_PX:
        return True, ctx
    if any(decl_hides(d, props, px) for d in props.values()):
        return True, ctx
    color = ctx.color
    if "color" in props and props["color"].value:
        color = parse_color(props["color"].value[0]) or color
    background = ctx.background
    own = background_of(props)
    if own is not None and own[3] > 0.5:  # a translucent background mostly shows what is under it
        background = own
    return False, Context(color=color, background=background, font_px=px)


def winning(candidates: list[tuple[Specificity, int, Decl]]) -> dict[str, Decl]:
    """The cascade: per property, !important first, then specificity, then source order."""
    best: dict[str, tuple[tuple[bool, Specificity, int], Decl]] = {}
    for spec, order, d in candidates:
        rank = (d.important, spec, order)
        if d.name not in best or rank > best[d.name][0]:
            best[d.name] = (rank, d)
    return {name: d for name, (_, d) in best.items()}
