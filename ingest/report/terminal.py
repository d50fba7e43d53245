"""Untrusted strings (file names, reasons that quote them, ACL origins) made safe for a terminal.

A file name may hold ANSI escape sequences (which recolour, move the cursor or retitle the
operator's terminal), newlines (which forge extra report lines) or bidi controls (which make a
name read backwards). ``safe`` shows each such character as a visible escape instead.
"""

from __future__ import annotations

import unicodedata

# Characters never shown raw: C0/C1 controls and DEL (Cc), format characters such as bidi
# overrides and zero-width spaces (Cf), line/paragraph separators, lone surrogates (undecodable
# bytes of a file name), unassigned and private-use code points.
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn", "Co"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def safe(text: str) -> str:
    """``text`` with every control, format or separator character written as a visible escape
    (``\\n``, ``\\x1b``, ``\\u202e``); a backslash is doubled so the escapes cannot be forged."""
    if text.isprintable() and "\\" not in text:
        return text  # the common case: one C-level scan
    return "".join(_escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    if ch == " " or unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
        return ch
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
