"""Which host a browser would send a URL to (WHATWG URL rules, the parts that decide the host).

A link survives the sanitiser only when this resolves it to an allowlisted host.
The rules follow the WHATWG URL standard where browsers differ from RFC 3986,
since the browser is the one that follows the link:

* leading and trailing spaces and C0 controls are stripped, tabs and newlines
  removed anywhere (``ht\\ttp://`` is ``http://``);
* for ``http`` and ``https`` any run of ``/`` and ``\\`` after the scheme is
  skipped, so ``http:evil.example/x`` and ``http:\\\\evil.example`` both go to
  ``evil.example``;
* a scheme-relative ``//host`` takes the page's scheme: its host is ``host``.

Anything this cannot decide for certain (userinfo, a percent escape, a
non-ASCII or otherwise unusual host, a relative path whose host is the page's)
is not allowed: fail closed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")
_STRIP = "".join(chr(c) for c in range(0x21))  # C0 controls and space
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_AUTHORITY_END = re.compile(r"[/\\?#]")
_PORT = re.compile(r":[0-9]*$")


def resolved_host(url: str) -> str | None:
    """The host an ``http(s)`` (or scheme-relative) URL resolves to, or None when it has none we trust."""
    text = _TAB_NEWLINE.sub("", url.strip(_STRIP))
    m = _SCHEME.match(text)
    if m is None:
        if not text[:2] or text[0] not in "/\\" or text[1] not in "/\\":
            return None  # a relative path: the page's own host, which the allowlist does not name
        rest = text
    elif m.group(1).lower() in ("http", "https"):
        rest = text[m.end() :]
    else:
        return None
    rest = rest.lstrip("/\\")
    end = _AUTHORITY_END.search(rest)
    authority = rest[: end.start()] if end else rest
    if "@" in authority or "%" in authority:
        return None
    host = _PORT.sub("", authority).lower().rstrip(".")
    return host if _HOST.match(host) else None


class HostAllowlist:
    """Hosts that links may point at; a listed host also allows its subdomains."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self._hosts = frozenset(h.strip().lower().rstrip(".") for h in hosts if h.strip())

    def __bool__(self) -> bool:
        return bool(self._hosts)

    def allows(self, url: str) -> bool:
        if not self._hosts:
            return False
        host = resolved_host(url)
        return host is not None and any(host == a or host.endswith("." + a) for a in self._hosts)

    def allows_host(self, host: str) -> bool:
        h = host.lower().rstrip(".")
        return bool(_HOST.match(h)) and any(h == a or h.endswith("." + a) for a in self._hosts)
