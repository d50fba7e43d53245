"""Whether a DOCX run is hidden from a reader, from its effective formatting as Word renders it.

Each property of a run is resolved as Word does: its direct formatting, then its character style and
the styles that one is based on, then its paragraph's style chain, then the document defaults
(``w:docDefaults``). A colour may name a theme colour (``w:themeColor``, which wins over ``w:val``),
lightened or darkened by ``w:themeTint`` / ``w:themeShade``, resolved through the theme part and the
settings' colour-scheme mapping. Text is hidden when it is vanished (``w:vanish``), set below
``MIN_PT`` points, squeezed below ``MIN_SCALE_PERCENT`` of its width (``w:w``), or coloured within
the HTML loader's threshold (``css.same_color``) of what is behind it: its highlight, else its run's
shading, else its paragraph's shading, else the page colour (``w:background``), else white. Text
coloured ``auto`` (or not at all) is never hidden by colour: Word draws it in a contrasting colour.
Known limit: table-cell shading and shapes drawn behind text are not looked at.
"""

from __future__ import annotations

from typing import Any

from ingest.prepare.loaders.css import RGBA, WHITE, same_color

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_MAX_STYLE_DEPTH = 32  # based-on chains are short; one that loops in a hostile file must still end
MIN_PT = 3.0  # below this size (points) text cannot be read on a page
MIN_SCALE_PERCENT = 20  # below this character width (w:w) text is a smear
_FALSE = frozenset({"0", "false", "off"})
# The highlight colours Word offers (ST_HighlightColor).
_HIGHLIGHT = {
    "black": "000000", "blue": "0000FF", "cyan": "00FFFF", "green": "00FF00", "magenta": "FF00FF", "red": "FF0000",
    "yellow": "FFFF00", "white": "FFFFFF", "darkBlue": "000080", "darkCyan": "008080", "darkGreen": "008000",
    "darkMagenta": "800080", "darkRed": "800000", "darkYellow": "808000", "darkGray": "808080", "lightGray": "C0C0C0",
}  # fmt: skip
_SLOTS = {
    "dark1": "dk1", "light1": "lt1", "dark2": "dk2", "light2": "lt2", "hyperlink": "hlink",
    "followedHyperlink": "folHlink", **{f"accent{i}": f"accent{i}" for i in range(1, 7)},
}  # fmt: skip
_DEFAULT_MAPPING = {"background1": "light1", "text1": "dark1", "background2": "light2", "text2": "dark2"}


def _rgb(hex_value: str | None) -> RGBA | None:
    if hex_value is None or len(hex_value) != 6:
        return None
    try:
        r, g, b = (int(hex_value[i : i + 2], 16) / 255 for i in (0, 2, 4))
    except ValueError:
        return None
    return (r, g, b, 1.0)


def _adjust(colour: RGBA, tint: str | None, shade: str | None) -> RGBA:
    """``w:themeTint`` moves a colour towards white, ``w:themeShade`` towards black (hex 00..FF)."""
    r, g, b, a = colour
    for value, towards_white in ((tint, True), (shade, False)):
        factor = _hex_byte(value)
        if factor is not None:
            f = factor / 255
            r, g, b = ((c * f + (1 - f)) if towards_white else c * f for c in (r, g, b))
    return (r, g, b, a)


def _hex_byte(value: str | None) -> int | None:
    try:
        return None if value is None else max(0, min(255, int(value, 16)))
    except ValueError:
        return None


class HiddenRuns:
    """Resolves the runs of one document; built once per document (its styles, theme and page)."""

    def __init__(self, document: Any) -> None:
        styles = document.styles.element
        self._styles = {s.get(f"{_W}styleId"): s for s in styles.iter(f"{_W}style")}
        default = [s for s in styles.iter(f"{_W}style") if s.get(f"{_W}type") == "paragraph" and _on(s, "default")]
        self._default_para = default[0] if default else None
        self._defaults = styles.find(f"{_W}docDefaults/{_W}rPrDefault/{_W}rPr")
        self._theme = _theme_colours(document)
        self._mapping = _scheme_mapping(document)
        background = document.element.find(f"{_W}background")
        self._page = self._colour(background, "color") if background is not None else None
        self._chains: dict[tuple[str | None, str | None], tuple[list[Any], list[Any]]] = {}

    def hidden(self, run: Any, para: Any) -> bool:
        rprs, pprs = self._chain(run, para)

        def first(tag: str) -> Any:
            return next((el for rpr in rprs if (el := rpr.find(f"{_W}{tag}")) is not None), None)

        vanish = first("vanish")
        if vanish is not None and (vanish.get(f"{_W}val") or "true").lower() not in _FALSE:
            return True
        size = first("sz")
        if size is not None and (half := _int(size.get(f"{_W}val"))) is not None and half / 2 < MIN_PT:
            return True
        scale = first("w")
        pct = _int((scale.get(f"{_W}val") or "").rstrip("%")) if scale is not None else None
        if pct is not None and pct < MIN_SCALE_PERCENT:
            return True
        colour_el = first("color")
        colour = self._colour(colour_el, "val") if colour_el is not None else None
        return colour is not None and same_color(colour, self._behind(first, pprs))

    def _behind(self, first: Any, pprs: list[Any]) -> RGBA:
        highlight = first("highlight")
        if highlight is not None:
            got = _rgb(_HIGHLIGHT.get(highlight.get(f"{_W}val") or ""))
            if got is not None:
                return got
        for shd in (first("shd"), next((el for p in pprs if (el := p.find(f"{_W}shd")) is not None), None)):
            fill = self._shading(shd)
            if fill is not None:
                return fill
        return self._page or WHITE

    def _shading(self, shd: Any) -> RGBA | None:
        if shd is None:
            return None
        if (shd.get(f"{_W}val") or "") == "solid":  # the pattern colour covers the fill completely
            solid = self._colour(shd, "color")
            if solid is not None:
                return solid
        return self._colour(shd, "fill", theme="themeFill")

    def _colour(self, el: Any, attr: str, theme: str = "themeColor") -> RGBA | None:
        """An element's colour: its theme colour (with tint and shade) over its hex value; None for auto."""
        name = el.get(f"{_W}{theme}")
        if name is not None:
            slot = _SLOTS.get(self._mapping.get(name, name))
            base = self._theme.get(slot) if slot is not None else None
            if base is not None:
                prefix = "themeFill" if theme == "themeFill" else "theme"
                return _adjust(base, el.get(f"{_W}{prefix}Tint"), el.get(f"{_W}{prefix}Shade"))
        value = el.get(f"{_W}{attr}")
        return None if value is None or value.lower() == "auto" else _rgb(value)

    def _chain(self, run: Any, para: Any) -> tuple[list[Any], list[Any]]:
        """(the run's rPr chain, the paragraph's pPr chain), most specific first."""
        rpr = run._r.rPr
        ppr = para._p.pPr
        char_id = _val(rpr, "rStyle")
        para_id = _val(ppr, "pStyle")
        key = (char_id, para_id)
        if key not in self._chains:
            char_styles = self._style_chain(self._styles.get(char_id) if char_id else None)
            para_style = self._styles.get(para_id) if para_id else self._default_para
            para_styles = self._style_chain(para_style)
            rprs = [s.find(f"{_W}rPr") for s in char_styles + para_styles] + [self._defaults]
            pprs = [s.find(f"{_W}pPr") for s in para_styles]
            self._chains[key] = ([r for r in rprs if r is not None], [p for p in pprs if p is not None])
        rprs, pprs = self._chains[key]
        return ([rpr, *rprs] if rpr is not None else rprs), ([ppr, *pprs] if ppr is not None else pprs)

    def _style_chain(self, style: Any) -> list[Any]:
        chain: list[Any] = []
        for _ in range(_MAX_STYLE_DEPTH):
            if style is None or any(style is s for s in chain):
                break
            chain.append(style)
            based = style.find(f"{_W}basedOn")
            style = self._styles.get(based.get(f"{_W}val")) if based is not None else None
        return chain


def _val(props: Any, tag: str) -> str | None:
    el = props.find(f"{_W}{tag}") if props is not None else None
    return None if el is None else el.get(f"{_W}val")


def _on(el: Any, attr: str) -> bool:
    return (el.get(f"{_W}{attr}") or "0").lower() in ("1", "true", "on")


def _int(value: str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def _theme_colours(document: Any) -> dict[str, RGBA]:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml.parser import parse_xml

    try:
        theme = parse_xml(document.part.part_related_by(RELATIONSHIP_TYPE.THEME).blob)
    except (KeyError, ValueError, SyntaxError):
        return {}
    scheme = theme.find(f"{_A}themeElements/{_A}clrScheme")
    out: dict[str, RGBA] = {}
    for slot in scheme if scheme is not None else ():
        name = str(slot.tag).removeprefix(_A)
        srgb, system = slot.find(f"{_A}srgbClr"), slot.find(f"{_A}sysClr")
        value = srgb.get("val") if srgb is not None else system.get("lastClr") if system is not None else None
        colour = _rgb(value)
        if colour is not None:
            out[name] = colour
    return out


def _scheme_mapping(document: Any) -> dict[str, str]:
    mapping = document.settings.element.find(f"{_W}clrSchemeMapping")
    if mapping is None:
        return dict(_DEFAULT_MAPPING)
    return {name: mapping.get(f"{_W}{short}") or slot for name, short, slot in _MAPPING_ATTRS}


_MAPPING_ATTRS = [("background1", "bg1", "light1"), ("text1", "t1", "dark1"), ("background2", "bg2", "light2"),
                  ("text2", "t2", "dark2")]  # fmt: skip
