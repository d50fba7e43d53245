"""The index's filters, engine-neutral: the ACL filter every search runs inside the engine."""

from __future__ import annotations

from docquery.core.collection import CHUNK_KINDS, Key, Kind
from docquery.core.domain import AclFilter
from docquery.index.engine import Match, Where


def kind(*kinds: Kind) -> Match:
    return Match(Key.KIND.value, tuple(k.value for k in kinds))


def any_chunk() -> Match:
    """Chunks of every kind, quarantined included: for maintenance, never for search."""
    return Match(Key.KIND.value, CHUNK_KINDS)


def doc(doc_id: str) -> Match:
    return Match(Key.DOC_ID.value, (doc_id,))


def groups(acl: AclFilter) -> Match:
    return Match(Key.ACL_GROUPS.value, acl.labels)


def acl_chunks(acl: AclFilter) -> Where:
    """The chunks ``acl`` may find: a point whose ``readers`` hold one of its labels.

    Only searchable chunks carry ``readers`` (``payload.chunk_payload``), so this one key also
    keeps out quarantined chunks, document records and the meta point. Applied inside the
    vector query and each prefetch: post-filtering top-k would both leak timing and starve
    callers of their own documents.
    """
    if acl.allows_nothing:
        # An empty any_of is no clause at all: it would admit every chunk.
        raise ValueError("an ACL filter without labels admits nothing; do not search with it")
    return Where(must=(), any_of=tuple(Match(Key.READERS.value, (label,)) for label in acl.labels))


def doc_chunks(doc_id: str, *, except_ids: tuple[str, ...] = ()) -> Where:
    return Where(must=(any_chunk(), doc(doc_id)), except_ids=except_ids)
