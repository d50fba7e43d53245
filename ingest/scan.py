"""Ingest-time injection scan: flags recorded in each chunk's payload.

Flags:

* ``injection``: text that addresses the model (override instructions, role or
  template markers, requests to reveal the prompt or exfiltrate through links);
* ``zero_width``: invisible characters (zero-width space, word joiner, bidi
  overrides, Unicode tag characters used for "ASCII smuggling"); they are removed
  from the stored and embedded text, the flag stays;
* ``hidden_html`` / ``hidden_text``: set by the HTML/Markdown and DOCX loaders on
  sections where hidden content was dropped.

With ``DOCQUERY_INGEST__QUARANTINE_FLAGGED=true`` (the default) flagged chunks are
stored as ``kind=quarantined_chunk`` and are never retrievable; set it to false to
keep them searchable with their flags.
"""

from __future__ import annotations

import re

INJECTION = "injection"
ZERO_WIDTH = "zero_width"

# Each pattern with a gate: groups of words, and every match of the pattern contains a word of
# each group. A pattern runs only on text that passes its gate (substring tests on the folded
# text), which makes the scan about five times faster on ordinary prose; the result is the
# same as running every pattern (tests/unit/test_ingest_scan.py checks both claims).
_GATED_PATTERNS: list[tuple[tuple[tuple[str, ...], ...], str]] = [
    ((("ignore", "disregard", "forget", "override", "bypass"),
      ("instruction", "prompt", "rules", "direction", "guideline", "context")),
     r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|"
     r"all|any|your|the|system)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|context)\b"),
    ((("new",), ("instruction",)), r"\bnew\s+(?:system\s+)?instructions?\s*:"),
    ((("you",), ("are",), ("now",)), r"\byou\s+are\s+now"),
    ((("from",), ("now",), ("you",)), r"\bfrom\s+now\s+on,?\s+you"),
    ((("pretend",),), r"\bpretend\s+(?:to\s+be|you\s+are)"),
    ((("act",), ("unrestricted", "jailbroken", "different", "dan")),
     r"\bact\s+as\s+(?:an?\s+)?(?:unrestricted|jailbroken|different|dan\b)"),
    ((("reveal", "print", "show", "repeat", "output", "leak"), ("prompt", "instructions", "rules")),
     r"\b(?:reveal|print|show|repeat|output|leak)\b[^.\n]{0,30}?\b(?:system\s+prompt|your\s+(?:instructions|prompt|"
     r"rules)|hidden\s+instructions)\b"),
    ((("not", "don't", "never"), ("tell", "inform", "mention"), ("user",)),
     r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to)\s+the\s+user\b"),
    ((("ai", "assistant", "language", "llm", "chatbot"), ("must", "should", "will"),
      ("ignore", "respond", "answer", "say", "include", "append", "output")),
     r"\b(?:as\s+an?\s+)?(?:ai|assistant|language\s+model|llm|chatbot)\s*[,:]?\s+(?:you\s+)?(?:must|should|will)\s+"
     r"(?:now\s+)?(?:ignore|respond|answer|say|include|append|output)\b"),
    ((("<",), (">",), ("im_start", "im_end", "system", "endoftext", "start_header_id", "eot_id")),
     r"<\|?(?:im_start|im_end|system|endoftext|start_header_id|eot_id)\|?>"),
    ((("[",), ("inst",)), r"\[/?INST\]"),
    ((("<<",), ("sys",), (">>",)), r"<<\s*/?SYS\s*>>"),
    ((("##",), ("system", "instruction")), r"^\s*#{2,}\s*(?:system|instruction)s?\s*:?\s*$"),
    ((("system", "assistant"), (":",)), r"^\s*(?:system|assistant)\s*:\s*\S"),
    ((("![",), ("http",), ("?",), ("=",)), r"!\[[^\]]*\]\(\s*https?://[^)\s]+\?[^)\s]*="),
    ((("send", "post", "forward", "exfiltrate", "append"), ("conversation", "chat", "api", "credentials", "password"),
      ("http", "url", "link", "mail")),
     r"\b(?:send|post|forward|exfiltrate|append)\b[^.\n]{0,40}?\b(?:conversation|chat\s+history|api\s+keys?|"
     r"credentials|password)\b[^.\n]{0,40}?\b(?:to|into)\b[^.\n]{0,20}?(?:https?://|url|link|e-?mail)"),
]  # fmt: skip
_PATTERNS = [pattern for _, pattern in _GATED_PATTERNS]
_GATED = [(gate, re.compile(p, re.IGNORECASE | re.MULTILINE)) for gate, p in _GATED_PATTERNS]
# Under IGNORECASE, re matches four non-ASCII letters to ASCII ones; the fold does the same, so
# a word test on the folded text never skips a pattern that could match.
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})

# Always invisible: ZWSP, word joiner and invisible operators, Mongolian vowel separator,
# bidi embeddings/overrides/isolates, BOM inside text, Unicode tag characters.
_INVISIBLE = re.compile("[\u200b\u2060-\u2064\u180e\u202a-\u202e\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
# ZWNJ/ZWJ are legitimate in many scripts and emoji; flagged only between ASCII letters.
_JOINER_IN_LATIN = re.compile("(?<=[A-Za-z])[\u200c\u200d]+(?=[A-Za-z])")


def scan(text: str) -> frozenset[str]:
    return scan_and_strip(text)[0]


def scan_and_strip(text: str) -> tuple[frozenset[str], str]:
    """(flags, the text without invisible characters): what a chunk stores and embeds."""
    flags: set[str] = set()
    clean = text
    if _has_invisible(text):
        flags.add(ZERO_WIDTH)
        clean = _remove_invisible(text)
    if _injection(clean):
        flags.add(INJECTION)
    return frozenset(flags), clean


def _has_invisible(text: str) -> bool:
    # Every character either regex looks for is outside ASCII; isascii() is a flag on the string.
    if text.isascii():
        return False
    joiners = "\u200c" in text or "\u200d" in text
    return _INVISIBLE.search(text) is not None or (joiners and _JOINER_IN_LATIN.search(text) is not None)


def _injection(text: str) -> bool:
    folded = (text if text.isascii() else text.translate(_FOLD)).lower()  # the fold maps non-ASCII only
    return any(
        all(any(w in folded for w in group) for group in gate) and rx.search(text) is not None for gate, rx in _GATED
    )


def strip_invisible(text: str) -> str:
    return _remove_invisible(text) if _has_invisible(text) else text


def _remove_invisible(text: str) -> str:
    return _JOINER_IN_LATIN.sub("", _INVISIBLE.sub("", text))
