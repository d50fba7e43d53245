"""Ingest-time injection scan: flags recorded in each chunk's payload.

Flags:

* ``injection``: text that addresses the model (override instructions, role or
  template markers, requests to reveal the prompt or exfiltrate through links);
* ``zero_width``: invisible characters used to hide or split text. Which characters
  are invisible comes from Unicode properties (Default_Ignorable_Code_Point, general
  category Cf, Bidi_Control, Variation_Selector; minus the visible
  Prepended_Concatenation_Mark signs), not a hand list. All of them are removed from
  the stored and embedded text, except where a script needs them (see ``_classify_run``);
  the flag is set for the ones that carry or disguise text: zero-width spaces (but a
  lone one used as a line-break hint, see ``_break_opportunity``) and joiners, bidi
  embeddings/overrides/isolates, tag characters ("ASCII smuggling"),
  Hangul fillers, runs of variation selectors (smuggling bytes), and any of them
  inside a Latin word;
* ``hidden_html`` / ``hidden_text``: set by the HTML/Markdown and DOCX loaders on
  sections where hidden content was dropped.

C0 and C1 control characters (all but tab, line feed, carriage return and form feed)
are removed from the stored and embedded text too, without a flag.

With ``DOCQUERY_INGEST__QUARANTINE_FLAGGED=true`` (the default) flagged chunks are
stored as ``kind=quarantined_chunk`` and are never retrievable; set it to false to
keep them searchable with their flags.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import regex

INJECTION = "injection"
ZERO_WIDTH = "zero_width"

# What addresses the model: one case-insensitive alternation. On the ingest path the whole scan costs
# under 1 % of the CPU of embedding the same text (docs/design.md).
_PATTERNS: list[str] = [
    r"\b(?:ignore|disregard|forget)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|"
    r"all|any|your|the|system)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|context)\b",
    # Documentation overrides "the default rules" and "the client certificate prompt" all the time.
    r"\b(?:override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|"
    r"all|any|your|system|safety)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|context)\b",
    r"\bnew\s+(?:system\s+)?instructions?\s*:",
    r"\byou\s+are\s+now",
    r"\bfrom\s+now\s+on,?\s+you",
    r"\bpretend\s+(?:(?:that\s+)?you\s+are|to\s+be\s+(?:an?\s+)?(?:unrestricted|jailbroken|evil|dan\b|different|"
    r"(?:ai|assistant|model|chatbot|llm|human|developer|admin)\b))",
    r"\bact\s+as\s+(?:an?\s+)?(?:unrestricted|jailbroken|different|dan\b)",
    r"\b(?:reveal|print|show|repeat|output|leak)\b[^.\n]{0,30}?\b(?:system\s+prompt|your\s+(?:instructions|prompt|"
    r"rules)|hidden\s+instructions)\b",
    r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to)\s+the\s+user\b",
    r"\b(?:as\s+an?\s+)?(?:ai|assistant|language\s+model|llm|chatbot)(?:\s*[,:])?\s+(?:you\s+)?(?:must|should|will)\s+"
    r"(?:now\s+)?(?:ignore|respond|answer|say|include|append|output)\b",
    r"<\|?(?:im_start|im_end|system|endoftext|start_header_id|eot_id)\|?>",
    r"\[/?INST\]",
    r"<<\s*/?SYS\s*>>",
    r"^[ \t]*#{2,}[ \t]*(?:system|instruction)s?[ \t]*:?[ \t]*$",
    r"^[ \t]*(?:system|assistant)[ \t]*:[ \t]*\S",
    r"!\[[^\]]{0,500}\]\([ \t]{0,20}https?://[^)\s]{1,2000}\?[^)\s]{0,2000}=",
    r"\b(?:send|post|forward|exfiltrate|append)\b[^.\n]{0,40}?\b(?:conversation|chat\s+history|api\s+keys?|"
    r"credentials|password)\b[^.\n]{0,40}?\b(?:to|into)\b[^.\n]{0,20}?(?:https?://|url|link|e-?mail)",
]  # fmt: skip
_INJECTION = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE | re.MULTILINE)

# Invisible by Unicode properties. Planes 0, 1 and 14 hold every such code point (the test checks
# all of Unicode); the set becomes one ``re`` class, built on first use.
_PROPERTIES = (
    r"(?V1)[[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Bidi_Control}\p{Variation_Selector}]"
    r"--\p{Prepended_Concatenation_Mark}]"
)
_PLANES = ((0x80, 0xD800), (0xE000, 0x20000), (0xE0000, 0xE1000))
# Invisible characters with legitimate uses in some scripts or emoji, kept or dropped silently
# when they are used that way: ZWNJ, ZWJ (Persian, Indic, emoji sequences), LRM, RLM, ALM
# (right-to-left text), soft hyphen (hyphenation hints), combining grapheme joiner.
_ZWNJ, _ZWJ, _SHY, _ZWSP = "\u200c", "\u200d", "\u00ad", "\u200b"
_CONTEXTUAL = frozenset({_ZWNJ, _ZWJ, "\u200e", "\u200f", "\u061c", _SHY, "\u034f"})
_KEPT_IN_CONTEXT = frozenset({_ZWNJ, _ZWJ})
# C0 and C1 control characters but tab, line feed, carriage return and form feed: no text needs them,
# and a terminal obeys them (an OSC 52 clipboard write and a colour change stored
# from a document reached the operator's terminal through `docquery ask`). Removed, not flagged: what they
# hid is plain text once they are gone, and the injection scan reads it.
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]+")
_KEYCAP = "\u20e3"
_BLACK_FLAG = "\U0001f3f4"
_TAG_LETTERS = re.compile("[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,6}\U000e007f")
# A lone zero-width space is a line-break hint where a renderer could not break otherwise: beside
# punctuation (``ARRAY_MAX``, ``----``, ``(0,0),(1,1)``), inside a token this long (hashes, ISO
# intervals), and between characters of scripts written without spaces.
_LONG_TOKEN = 16
_TOKEN_EDGE = regex.compile(_PROPERTIES + r"|\s")
_SPACELESS = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]")


@functools.cache
def _invisible_run() -> re.Pattern[str]:
    chars = regex.findall(_PROPERTIES, "".join(chr(c) for lo, hi in _PLANES for c in range(lo, hi)))
    return re.compile(f"[{_ranges(sorted(map(ord, chars)))}]+")


def _ranges(codes: list[int]) -> str:
    out: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code != prev + 1:
            out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev != start else ""))
            start = code
        prev = code
    return "".join(out)


def _is_variation_selector(ch: str) -> bool:
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF or 0x180B <= code <= 0x180D or code == 0x180F


def _classify_run(run: str, head: str, tail: str) -> tuple[str, bool]:
    """(what of ``run`` to keep, whether it is suspicious) for one run of invisible characters
    between ``head`` and ``tail`` (up to ``_LONG_TOKEN`` characters of the text on each side)."""
    before, after = head[-1:], tail[:1]
    if run == _ZWSP and _break_opportunity(head, tail):
        return "", False
    if before == _BLACK_FLAG and _TAG_LETTERS.fullmatch(run):
        return run, False  # an emoji subdivision flag (England, Scotland, Wales)
    if _suspicious(run, before, after):
        return "", True
    if any(_is_variation_selector(ch) for ch in run):
        return run, False  # one selector after a non-ASCII base (or a keycap): emoji or ideographic variant
    return "".join(ch for ch in run if ch in _KEPT_IN_CONTEXT), False


def _break_opportunity(head: str, tail: str) -> bool:
    """Whether a lone zero-width space between ``head`` and ``tail`` is a line-break hint."""
    before, after = head[-1:], tail[:1]
    if not before or not after:
        return False
    if unicodedata.category(before)[0] in "PS" or unicodedata.category(after)[0] in "PS":
        return True  # a break after or before punctuation splits no word, even beside a space
    if before.isspace() or after.isspace():
        return False  # a space is already a break: beside one it has no use
    if _SPACELESS.match(before) or _SPACELESS.match(after):
        return True
    # Inside a short word of a spaced script it only splits the word (a trigger word or a secret); the
    # token is counted to the nearest space or other hint, so hints every few letters never make it long.
    return len(_edge(head[::-1])) + len(_edge(tail)) >= _LONG_TOKEN


def _edge(text: str) -> str:
    """``text`` up to its first space or invisible character."""
    m = _TOKEN_EDGE.search(text)
    return text if m is None else text[: m.start()]


def _suspicious(run: str, before: str, after: str) -> bool:
    if any(ch not in _CONTEXTUAL and not _is_variation_selector(ch) for ch in run):
        return True  # zero-width spaces, bidi overrides, tags, fillers: never needed in text
    if len([ch for ch in run if ch != _ZWJ]) > 1 or run.count(_ZWJ) > 1:
        return True  # a run: binary encodings and variation-selector smuggling look like this
    latin = before.isascii() and before.isalnum() and after.isascii() and after.isalnum()
    if latin and run != _SHY:
        return True  # inside a Latin word, only a soft hyphen has a use
    keycap = before != "" and before in "0123456789#*" and after == _KEYCAP
    # ASCII has no variation sequences (but keycaps: 1 + FE0F + 20E3).
    return any(_is_variation_selector(ch) for ch in run) and before.isascii() and not keycap


def scan(text: str) -> frozenset[str]:
    return scan_and_strip(text)[0]


def scan_and_strip(text: str) -> tuple[frozenset[str], str]:
    """(flags, the text without invisible characters): what a chunk stores and embeds."""
    flags: set[str] = set()
    suspicious, clean = _strip(text)
    if suspicious:
        flags.add(ZERO_WIDTH)
    # The joiners and selectors a script keeps would still split a phrase for the pattern, so it also reads
    # the text without them; both, because taking one out can join two words ("²" + ZWNJ + "rules").
    if _injection(clean) or (not clean.isascii() and _injection(_invisible_run().sub("", clean))):
        flags.add(INJECTION)
    return frozenset(flags), clean


def _strip(text: str) -> tuple[bool, str]:
    """(whether a suspicious invisible character was found, the text without invisible ones)."""
    if _CONTROLS.search(text) is not None:
        text = _CONTROLS.sub("", text)
    # Every other invisible character is outside ASCII; isascii() is a flag on the string, so most
    # chunks of most corpora never reach the regex.
    if text.isascii():
        return False, text
    runs = _invisible_run()
    if runs.search(text) is None:
        return False, text
    suspicious = False

    def replace(m: re.Match[str]) -> str:
        nonlocal suspicious
        start, end = m.span()
        head, tail = text[max(start - _LONG_TOKEN, 0) : start], text[end : end + _LONG_TOKEN]
        keep, bad = _classify_run(m.group(0), head, tail)
        suspicious |= bad
        return keep

    clean = runs.sub(replace, text)
    return suspicious, clean


def _injection(text: str) -> bool:
    return _INJECTION.search(text) is not None


def strip_invisible(text: str) -> str:
    return _strip(text)[1]
