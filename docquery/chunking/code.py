"""Code blocks in section text: fenced as CommonMark fences, so they reach the chunk, and from
there any Markdown output, as code with their line breaks.

The loaders fence code (``<pre>``, DOCX code styles, Python's ``>>>`` sessions); Markdown keeps
its own fences. The chunker finds the blocks with ``code_blocks`` and never cuts inside one
that fits a chunk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
_TICKS = re.compile(r"`+")


def fenced(code: str, info: str = "") -> str:
    """``code`` between backtick fences longer than any backtick run inside it (so none closes it)."""
    longest = max((len(m.group()) for m in _TICKS.finditer(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{code}\n{fence}"


@dataclass(frozen=True)
class CodeBlock:
    """A fenced block of ``text``: ``text[start:end]`` runs from its opening fence line to its closing
    fence line (or the end of the text when it is never closed); ``body`` starts after the opening line."""

    start: int
    body: int
    end: int
    opening: str  # the opening fence line, as a re-fenced part repeats it
    fence: str  # its fence, which closes a re-fenced part


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of ``text`` in order (CommonMark's rules: a closing fence is the same
    character, at least as long, with nothing after it but spaces)."""
    out: list[CodeBlock] = []
    pos = 0
    while True:
        m = _OPEN.search(text, pos)
        if m is None:
            return out
        fence, info = m.group(1), m.group(2)
        if fence[0] == "`" and "`" in info:  # not a fence: an inline code span
            pos = m.end() + 1
            continue
        closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        body = min(m.end() + 1, len(text))
        close = closing.search(text, body)
        if close is None:
            out.append(CodeBlock(m.start(), body, len(text), m.group(), fence))
            return out
        out.append(CodeBlock(m.start(), body, close.end(), m.group(), fence))
        pos = close.end() + 1


_PROMPT = re.compile(r"^>>>(?: |$)")


def fence_sessions(text: str) -> str:
    """Python interactive sessions outside fences (a paragraph whose first line starts with ``>>>``,
    up to the next blank line) fenced as code: a prompt read as Markdown is a triple blockquote."""
    blocks = code_blocks(text)
    out: list[str] = []
    pos = 0
    for block in [*blocks, None]:
        stop = block.start if block is not None else len(text)
        out.append(_fence_prose_sessions(text[pos:stop]))
        if block is not None:
            out.append(text[block.start : block.end])
            pos = block.end
    return "".join(out)


def _fence_prose_sessions(prose: str) -> str:
    paragraphs = re.split(r"(\n[ \t]*\n)", prose)
    for i in range(0, len(paragraphs), 2):
        para = paragraphs[i]
        lead = para[: len(para) - len(para.lstrip("\n"))]
        body = para[len(lead) :]
        if _PROMPT.match(body):
            paragraphs[i] = lead + fenced(body.rstrip("\n"), "pycon") + para[len(para.rstrip("\n")) :]
    return "".join(paragraphs)


@dataclass(frozen=True)
class Piece:
    """A chunk's span of its text, and the fence lines a part of a long code block gets around it."""

    start: int
    end: int
    head: str = ""  # the opening fence line and a newline, before a part that does not start the block
    tail: str = ""  # a newline and the closing fence, after a part that does not end it


def block_parts(text: str, block: CodeBlock, count: Callable[[int, int], int], room: int) -> list[Piece]:
    """``block`` cut at line boundaries into parts of at most ``room`` tokens (``count(a, b)`` counts
    ``text[a:b]``; ``room`` leaves space for the fence lines), each re-fenced. A line longer than
    ``room`` is a part of its own: the caller cuts it further."""
    lines: list[tuple[int, int]] = []
    at = block.start
    while at < block.end:
        nl = text.find("\n", at, block.end)
        stop = block.end if nl < 0 else nl
        lines.append((at, stop))
        at = stop + 1
    parts: list[tuple[int, int]] = []
    first = lines[0][0]
    last = lines[0][1]
    for a, b in lines[1:]:
        if count(first, b) <= room:
            last = b
            continue
        parts.append((first, last))
        first, last = a, b
    parts.append((first, last))
    head, tail = block.opening + "\n", "\n" + block.fence
    return [Piece(a, b, "" if a == block.start else head, "" if b == block.end else tail) for a, b in parts]
