"""Byte-level checks and decoding shared by the text-like loaders (txt, md, html).

Binary content and undecodable bytes are reported, never guessed at: decoding a
binary blob as Latin-1 would index garbage and could smuggle control characters.
"""

from __future__ import annotations

import codecs

from ingest.model import FileRejected

SNIFF_BYTES = 8192
# Control characters other than tab, newline, carriage return and form feed.
_CONTROL = bytes(b for b in [*range(32), 127] if b not in (9, 10, 12, 13))


def looks_binary(data: bytes) -> bool:
    head = data[:SNIFF_BYTES]
    if not head:
        return False
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    if b"\x00" in head:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL))  # bytes.translate deletes them, in C
    return controls / len(head) > 0.05


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM) or BOM-marked UTF-16; then Windows-1252 as the one legacy fallback."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise FileRejected("bad text encoding (invalid UTF-16)") from None
    if looks_binary(data):
        raise FileRejected("binary content in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        raise FileRejected("bad text encoding (neither UTF-8 nor Windows-1252)") from None
    return text
