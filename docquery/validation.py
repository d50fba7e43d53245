"""What a caller may ask, checked in one place for the API and every command.

Each check raises :class:`InvalidRequest` naming the field and the bound, never the value (it is the
caller's text). The API answers it as 422 ``invalid request: FIELD: REASON``; a command prints it in one
line and exits 2. No web framework here: the commands import this without loading the service.
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

from docquery.core.collection import (
    COLLECTION_NAME_RULE,
    GROUP_NAME_RULE,
    GROUP_PATTERN,
    PUBLIC_GROUP,
    is_valid_collection_name,
    is_valid_group_name,
)
from docquery.core.errors import UsageProblem

if TYPE_CHECKING:
    from docquery.chunking import ChunkSpec
    from docquery.config.settings import Settings

QUESTION_BOUND = "DOCQUERY_API__MAX_QUESTION_CHARS"
TOP_K_BOUND = "DOCQUERY_RETRIEVAL__MAX_TOP_K"
# Control, format (bidi, zero-width), line and paragraph separators, surrogates, private use, unassigned.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


class InvalidRequest(UsageProblem):
    """One field of a request or command line is out of its bounds (HTTP 422, exit 2)."""

    def __init__(self, field: str, reason: str, *, setting: str = "", hint: str = "") -> None:
        # A command's line also names the setting behind the bound and what to do; the API's does not.
        super().__init__(f"{field}: {reason}" + (f" ({setting})" if setting else "") + (f"; {hint}" if hint else ""))
        self.field = field
        self.reason = reason


def question(text: str, settings: Settings, field: str = "question", hint: str = "") -> str:
    """The question as the pipeline gets it: not blank, at most ``api.max_question_chars`` as sent, valid
    Unicode (a lone surrogate, such as undecodable bytes on a command line, is no text any encoder takes)."""
    stripped = text.strip()
    if not stripped:
        raise InvalidRequest(field, "must not be blank", hint=hint)
    limit = settings.api.max_question_chars
    # The length as sent, so the bound is exactly the API schema's maxLength.
    if len(text) > limit:
        raise InvalidRequest(field, f"longer than {limit} characters", setting=QUESTION_BOUND)
    try:
        stripped.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(field, "not valid Unicode text") from None
    return stripped


def top_k(value: int | None, settings: Settings, field: str = "top_k", default: int | None = None) -> int:
    """1..``retrieval.max_top_k``; none given is the default, capped by the maximum (a request that set
    nothing is never refused for the operator's defaults)."""
    high = settings.retrieval.max_top_k
    if value is None:
        return min(default or settings.retrieval.top_k, high)
    if not 1 <= value <= high:
        raise InvalidRequest(field, f"must be between 1 and {high}", setting=TOP_K_BOUND)
    return value


def group_names(value: str | None, field: str) -> frozenset[str]:
    """Comma-separated group names as ``ingest --groups`` takes them; none is allowed (sees nothing).

    The reserved public label is refused: every caller sees public documents already.
    """
    names = [g.strip() for g in (value or "").split(",") if g.strip()]
    for i, name in enumerate(names, start=1):
        if name == PUBLIC_GROUP:
            raise InvalidRequest(field, f"{PUBLIC_GROUP!r} is a reserved label; every caller sees public documents")
        if not is_valid_group_name(name):
            raise InvalidRequest(field, f"group {i} is not a valid group name (pattern {GROUP_PATTERN})")
    return frozenset(names)


def collection(name: str | None, field: str = "--collection") -> str | None:
    """A collection name is a folder under the data dir: ``../x`` must never reach a path."""
    if name is not None and not is_valid_collection_name(name):
        raise InvalidRequest(field, f"must be {COLLECTION_NAME_RULE}, e.g. docs-2024")
    return name


def chunk_spec(settings: Settings) -> ChunkSpec:
    """The chunker's settings, checked together (the overlap must be smaller than the chunk)."""
    from docquery.chunking import ChunkSpec

    try:
        return ChunkSpec(settings.ingest.chunk_tokens, settings.ingest.chunk_overlap)
    except ValueError as exc:
        raise InvalidRequest("DOCQUERY_INGEST__CHUNK_TOKENS/CHUNK_OVERLAP", str(exc)) from None


def upload_groups(value: str, field: str = "groups") -> tuple[str, ...]:
    """An upload's ``groups``: split on commas and nothing else, never trimmed (``"a, b"`` names ``" b"``, which
    is refused), each a group name by the ingest's rule; the reserved public label is ``public=true``'s."""
    names = value.split(",")
    for i, name in enumerate(names, start=1):
        if name == PUBLIC_GROUP:
            raise InvalidRequest(field, f"{PUBLIC_GROUP!r} is a reserved label; send public=true instead")
        if not is_valid_group_name(name):
            raise InvalidRequest(field, f"group {i} is not a valid group name ({GROUP_NAME_RULE}, nothing trimmed)")
    return tuple(sorted(set(names)))


def upload_file_name(name: str, max_bytes: int, field: str) -> str:
    """A file name as the client sent it, refused (never repaired) unless it is one plain path segment: no
    separator, no ``.`` or ``..``, no control, format (bidi) or unassigned character, nothing surrounding it
    that a terminal would hide, and at most ``max_bytes`` of UTF-8. It reaches the disk, logs and listings."""
    if not name:
        raise InvalidRequest(field, "no file name (each part of files needs a filename)")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequest(field, "file name is not valid Unicode") from None
    if size > max_bytes:
        raise InvalidRequest(field, f"file name longer than {max_bytes} bytes")
    if name in (".", "..") or "/" in name or "\\" in name:
        raise InvalidRequest(field, "file name must be a name, not a path (no '/', '\\\\', '.' or '..')")
    if name != name.strip() or any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in name):
        raise InvalidRequest(field, "file name holds a control, invisible or surrounding space character")
    return name
