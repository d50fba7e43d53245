"""``docquery ask`` through a running ``docquery serve``: POST /v1/query with an API key from a file.

The key is read from a file the user names, never from a flag's value (a flag is visible to every user
of the machine in the process list) and never from the service's secrets, which hold only its hash.
Every refusal is one line: what the service said (its error messages never quote the request) or
where it could not be reached, never the key or the question.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from docquery.core.errors import ServiceUnavailable, UsageProblem

# An answer may wait for the language model: the service's own timeouts end it before this.
TIMEOUT_S = 300.0
_MAX_KEY_BYTES = 4096
_MAX_ANSWER_BYTES = 16 * 1024 * 1024


def read_key(path: Path) -> str:
    """The API key: the file's one line (surrounding whitespace and a final newline are allowed)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise UsageProblem(
            f"--api-key-file: cannot read {path}: {exc.strerror}; give a file holding the API key"
        ) from None
    if len(raw) > _MAX_KEY_BYTES:
        raise UsageProblem(f"--api-key-file: {path} is longer than an API key: it must hold the key alone")
    try:
        key = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        key = "\n"  # refused below, without repeating the bytes
    if not key:
        raise UsageProblem(f"--api-key-file: {path} is empty: put the API key in it, on one line")
    if not key.isprintable() or " " in key:
        raise UsageProblem(f"--api-key-file: {path} must hold one API key on one line (printable ASCII, no spaces)")
    return key


def check_server_url(url: str) -> str:
    if not url.startswith(("http://", "https://")) or len(url) < 8 or any(c.isspace() for c in url):
        raise UsageProblem("--server: give the service's base URL, e.g. http://127.0.0.1:8080")
    return url.rstrip("/")


def query(url: str, key: str, question: str, top_k: int | None) -> bytes:
    """The service's JSON answer, as it sent it."""
    body: dict[str, object] = {"question": question}
    if top_k is not None:
        body["top_k"] = top_k
    request = urllib.request.Request(  # noqa: S310  # the scheme is checked: http or https only
        f"{url}/v1/query",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Accept": "application/json"},
    )
    # No proxy from the environment: the request carries the question and the key.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=TIMEOUT_S) as response:
            raw: bytes = response.read(_MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise _refused(url, exc.code, _message(exc)) from None
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        why = getattr(reason, "strerror", None) or type(reason).__name__
        raise ServiceUnavailable(
            f"the docquery service at {url} did not answer ({why}): check that it is running, or ask without it"
        ) from None
    if len(raw) > _MAX_ANSWER_BYTES:
        raise ServiceUnavailable(f"the docquery service at {url} sent an answer larger than 16 MiB")
    return raw


def _message(exc: urllib.error.HTTPError) -> str:
    """The service's error message (fixed texts that never quote the request), printable, one line."""
    try:
        message = json.loads(exc.read(64 * 1024))["error"]["message"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if not isinstance(message, str):
        return ""
    return "".join(c if c.isprintable() else " " for c in message)[:300]


def _refused(url: str, status: int, message: str) -> UsageProblem | ServiceUnavailable:
    said = f": {message}" if message else ""
    if status in (401, 403):
        return UsageProblem(
            f"the docquery service at {url} refused the API key ({status}{said}): check that --api-key-file holds "
            "one of its keys, with the query role"
        )
    if status == 429 or status >= 500:
        return ServiceUnavailable(f"the docquery service at {url} cannot answer now ({status}{said}); try again later")
    return UsageProblem(f"the docquery service at {url} refused the question ({status}{said})")
