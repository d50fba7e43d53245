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

_PATTERNS = [
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|preceding|"
    r"all|any|your|the|system)\b[^.\n]{0,30}?\b(?:instructions?|prompts?|rules|directions|guidelines|context)\b",
    r"\bnew\s+(?:system\s+)?instructions?\s*:",
    r"\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you|pretend\s+(?:to\s+be|you\s+are)|act\s+as\s+(?:an?\s+)?"
    r"(?:unrestricted|jailbroken|different|dan\b))",
    r"\b(?:reveal|print|show|repeat|output|leak)\b[^.\n]{0,30}?\b(?:system\s+prompt|your\s+(?:instructions|prompt|"
    r"rules)|hidden\s+instructions)\b",
    r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention\s+(?:this\s+)?to)\s+the\s+user\b",
    r"\b(?:as\s+an?\s+)?(?:ai|assistant|language\s+model|llm|chatbot)\s*[,:]?\s+(?:you\s+)?(?:must|should|will)\s+"
    r"(?:now\s+)?(?:ignore|respond|answer|say|include|append|output)\b",
    r"<\|?(?:im_start|im_end|system|endoftext|start_header_id|eot_id)\|?>",
    r"\[/?INST\]|<<\s*/?SYS\s*>>|^\s*#{2,}\s*(?:system|instruction)s?\s*:?\s*$",
    r"^\s*(?:system|assistant)\s*:\s*\S",
    r"!\[[^\]]*\]\(\s*https?://[^)\s]+\?[^)\s]*=",
    r"\b(?:send|post|forward|exfiltrate|append)\b[^.\n]{0,40}?\b(?:conversation|chat\s+history|api\s+keys?|"
    r"credentials|password)\b[^.\n]{0,40}?\b(?:to|into)\b[^.\n]{0,20}?(?:https?://|url|link|e-?mail)",
]
_INJECTION = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE | re.MULTILINE)

# Always invisible: ZWSP, word joiner and invisible operators, Mongolian vowel separator,
# bidi embeddings/overrides/isolates, BOM inside text, Unicode tag characters.
_INVISIBLE = re.compile("[\u200b\u2060-\u2064\u180e\u202a-\u202e\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
# ZWNJ/ZWJ are legitimate in many scripts and emoji; flagged only between ASCII letters.
_JOINER_IN_LATIN = re.compile("(?<=[A-Za-z])[\u200c\u200d]+(?=[A-Za-z])")


def scan(text: str) -> frozenset[str]:
    flags: set[str] = set()
    if _INVISIBLE.search(text) or _JOINER_IN_LATIN.search(text):
        flags.add(ZERO_WIDTH)
    if _INJECTION.search(strip_invisible(text)):
        flags.add(INJECTION)
    return frozenset(flags)


def strip_invisible(text: str) -> str:
    return _JOINER_IN_LATIN.sub("", _INVISIBLE.sub("", text))
