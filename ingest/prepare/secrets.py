"""Credentials never become searchable: files known to hold them are skipped, passages carrying them
are quarantined with the flag ``secret``.

* By name (``secret_file``): private keys (``id_*`` but ``*.pub``, ``*.pem``, ``*.key``, ``*.p12``,
  ``*.pfx``, ``*.ppk``, ``*.jks``, ``*.keystore``) and credential files (``.env``, ``.env.*``,
  ``.netrc``, ``.pgpass``, ``.git-credentials``, ``credentials``, ``kubeconfig``, ``*.kubeconfig``)
  are skipped and reported, whatever their content.
* By content (``scan_secrets``): detect-secrets' plugins run in-process on each line of a chunk that
  carries a credential cue (a cheap pre-filter: the plugins cost about 1 ms a line): PEM private
  keys, cloud access keys, API and bearer tokens, passwords in config-like text, connection strings
  with a password. A value is a placeholder, and stays indexed, when it is a known documentation
  example (``AKIAIOSFODNN7EXAMPLE``), looks templated (``<your-token>``, ``${TOKEN}``, ``{{ x }}``),
  is a common word, spells out what it stands for (``foopass``, ``mypasswd``), is a lower-case
  identifier (``gettoken_function``), or has too little entropy to be a real secret.

Only the flag is kept: no secret value reaches a log, a report or the payload's flags.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections import Counter
from typing import Any

SECRET = "secret"  # noqa: S105  # the flag's name, not a credential
# Part of the pipeline fingerprint: a change to what the scans flag (secrets, injection phrases, zero-width
# hints) re-scans every indexed document.
SCAN_VERSION = "3"

_KEY_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".ppk", ".jks", ".keystore")
_CREDENTIAL_NAMES = frozenset({".env", ".netrc", "_netrc", ".pgpass", ".git-credentials", "credentials", "kubeconfig"})


def secret_file(name: str) -> str | None:
    """Why a file is skipped for its name alone, or None."""
    lower = name.lower()
    if lower.startswith("id_") and not lower.endswith(".pub"):
        return "holds credentials (an SSH private key by its name); not indexed"
    if lower.endswith(_KEY_SUFFIXES):
        return "holds credentials (a private key or key store by its name); not indexed"
    if lower in _CREDENTIAL_NAMES or lower.startswith(".env.") or lower.endswith(".kubeconfig"):
        return "holds credentials (a credentials file by its name); not indexed"
    return None


# A line worth the plugins' time names a credential or has the shape of a known token.
_CUE = re.compile(
    r"key|token|secret|pass|pwd|auth|bearer|credential|://|akia|asia|gh[pousr]_|github_pat|glpat|xox[abposr]|"
    r"sk[-_]|rk_live|eyj|begin |accountkey|sg\.|npm_|pypi-|private",
    re.IGNORECASE,
)
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"^[A-Za-z0-9+/]{40,}={0,2}$", re.MULTILINE)
_PUBLIC_PEM = re.compile(
    r"-----BEGIN (?:CERTIFICATE|PUBLIC KEY|[A-Z0-9 ]*PUBLIC KEY|X509 CRL|CERTIFICATE REQUEST)-----"
)
# detect-secrets' keyword plugin misses values that open with punctuation (``password: +6n6K...``).
_ASSIGNED = re.compile(
    r"\b[\w.-]*(?:password|passwd|pwd|secret|token|api[_-]?key)[\w.-]*[\"']?\s*[:=]\s*[\"']?([^\s\"']{8,})",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\bBearer\s+([A-Za-z0-9._~+/-]{20,}=*)")
_KNOWN_EXAMPLES = frozenset(
    {
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AKIAI44QH8DHBEXAMPLE",
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    }
)
_PLACEHOLDER_PARTS = ("example", "sample", "placeholder", "changeme", "change_me", "change-me", "dummy",
                      "redacted", "your", "xxxx", "****", "...", "<", ">", "${", "{{", "%(", "$(", "todo", "fixme",
                      "insert", "pass", "foo", "secret")  # fmt: skip
# A lower-case identifier (gettoken_function, scram-sha-256) names a setting or a function, not a secret.
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)+")
_COMMON = frozenset({"password", "passwd", "secret", "pass", "admin", "root", "test", "testing", "foo", "bar",
                     "123456", "12345678", "qwerty", "letmein", "none", "null", "true", "false", "token", "apikey",
                     "api_key", "mypassword", "hunter2", "s3cr3t", "p@ssw0rd", "password1", "password123"})  # fmt: skip
_MIN_ENTROPY = 3.0  # bits a character: real keys and passwords sit well above, words and runs below
_MIN_LENGTH = 8
_SKIPPED = frozenset({"HexHighEntropyString", "Base64HighEntropyString", "IPPublicDetector"})


@functools.cache
def _plugins() -> tuple[Any, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    # Its logger turns on logging.captureWarnings at import, which would write a warning's whole text (it
    # can quote the document) where the parse process keeps one line per warning: give back the handler.
    logging.captureWarnings(False)
    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    return tuple(cls() for cls in sorted(classes, key=lambda c: c.__name__) if cls.__name__ not in _SKIPPED)


def entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def is_placeholder(value: str) -> bool:
    """Whether a matched value is a documentation example rather than a real-looking secret."""
    lower = value.lower().strip("'\"`")
    if value in _KNOWN_EXAMPLES or "EXAMPLE" in value or lower in _COMMON:
        return True
    if any(part in lower for part in _PLACEHOLDER_PARTS) or _IDENTIFIER.fullmatch(value.strip("'\"`")):
        return True
    return len(lower) < _MIN_LENGTH or entropy(lower) < _MIN_ENTROPY


def _token_of(line: str, value: str) -> str:
    """The value as written: some plugins capture only part of a token (``ghp`` of ``ghp_...``)."""
    at = line.find(value) if value else -1
    if at < 0:
        return value
    start, end = at, at + len(value)
    while start > 0 and not line[start - 1].isspace() and line[start - 1] not in "=:'\"(,":
        start -= 1
    while end < len(line) and not line[end].isspace() and line[end] not in "'\"),;@":
        end += 1
    return line[start:end]


def scan_secrets(text: str) -> frozenset[str]:
    """``{SECRET}`` when ``text`` carries a real-looking credential, else empty."""
    armour = _PEM.search(text)
    if armour is not None and _PEM_BODY.search(text, armour.end()):
        return frozenset({SECRET})  # a private key's armour with its body (a header alone is an example)
    if armour is None and not _PUBLIC_PEM.search(text) and len(_PEM_BODY.findall(text)) >= 3:
        return frozenset({SECRET})  # a key's body split off into a chunk of its own
    for line in text.splitlines():
        if not _CUE.search(line):
            continue
        for m in (*_BEARER.finditer(line), *_ASSIGNED.finditer(line)):
            if not is_placeholder(m.group(1)):
                return frozenset({SECRET})
        for plugin in _plugins():
            filename = "config.yaml" if type(plugin).__name__ == "KeywordDetector" else "document.txt"
            for found in plugin.analyze_line(filename=filename, line=line, line_number=0):
                if found.type != "Private Key" and not is_placeholder(_token_of(line, found.secret_value or "")):
                    return frozenset({SECRET})  # private keys: the armour rule above decides
    return frozenset()
