"""URLs as messages may show them: where a service is, never credentials or a query string."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def public_url(url: str) -> str | None:
    """``scheme://host:port/path`` of ``url``: userinfo, query and fragment dropped (they may carry a key).

    None for a value with no scheme or host, which is not echoed: ``user:key@host`` parses as a scheme and a path.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
