"""The collection contract: what ingestion and the query service must agree on.

One Qdrant collection holds three kinds of points, told apart by ``kind``:

* ``chunk``: a chunk with a dense vector ``dense`` and a sparse BM25 vector ``bm25``, and
  ``readers``, the ACL labels that may find it in a search (``quarantined_chunk``, its
  quarantined twin, keeps its ``acl_groups`` but has no ``readers``);
* ``document``: one record per source document (hash, chunk count, ACL, status),
  with no vectors, so ingest can skip, replace and delete documents without a
  second database;
* ``meta``: one point that records the embedding model id and dimension the
  collection was built with (and, when encryption at rest is on, the wrapped data key).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from docquery.core.errors import VectorIndexError

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"

# A reserved ACL label for documents ingested with ``--public``. Group names
# from credentials can never equal it (AclFilter strips it).
PUBLIC_GROUP = "__public__"

# A collection name is one path segment of the embedded engine (<data_dir>/collections/<name>) and
# of a server's URLs. Threat: "../x" writing outside the data dir, or escapes reaching the terminal.
# Well inside Qdrant's own rule (1 to 255 characters, none of <>:"/\\|?* or NUL).
COLLECTION_NAME_RULE = "1 to 64 letters, digits, '-' or '_', starting with a letter or digit"
_COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def is_valid_collection_name(name: str) -> bool:
    return _COLLECTION_NAME.fullmatch(name) is not None


# One pattern for every group name, from an ACL file, `ingest --groups` or `ask --as-groups`: a letter,
# digit or "/" first (so never the reserved ``__public__``), then letters, digits and ``. _ : @ / + = -``;
# at most 128. Shared here so that `ask` cannot name a group that no document can carry.
GROUP_PATTERN = r"[A-Za-z0-9/][A-Za-z0-9._:@/+=-]{0,127}"
GROUP_NAME_RULE = "1 to 128 ASCII letters, digits or . _ : @ / + = -, starting with a letter, digit or /"
_GROUP = re.compile(GROUP_PATTERN)


def is_valid_group_name(name: str) -> bool:
    return _GROUP.fullmatch(name) is not None


_ID_NAMESPACE = uuid.UUID("5b0c6c0e-8f3a-4f0e-9a59-1d3c0f6a2b71")
META_POINT_ID = uuid.uuid5(_ID_NAMESPACE, "docquery:meta")


class Kind(StrEnum):
    CHUNK = "chunk"
    # A chunk the ingest-time injection scan flagged while quarantine is on. It is
    # stored (for audit and for a later release) but its kind keeps it out of every
    # search: the search filter asks for kind == chunk, so no extra clause is needed.
    QUARANTINED_CHUNK = "quarantined_chunk"
    DOCUMENT = "document"
    META = "meta"


class Key(StrEnum):
    """Payload keys. Keyword-indexed ones are listed in ``INDEXED_KEYWORDS``."""

    KIND = "kind"
    DOC_ID = "doc_id"
    SOURCE = "source"
    ROOT = "root"
    TITLE = "title"
    PAGE = "page"
    CHUNK_INDEX = "chunk_index"
    CONTENT_SHA256 = "content_sha256"
    ACL_GROUPS = "acl_groups"
    # The labels that may find the point in a search: a searchable chunk's ACL groups, and on no
    # other point. Every search filters on this key alone (docquery/index/filters.py).
    READERS = "readers"
    INGESTED_AT = "ingested_at"
    TEXT = "text"
    FLAGS = "flags"
    SECTION = "section"  # index of the loader's section the chunk came from
    CHAR_START = "char_start"  # the chunk's character offsets in that section
    CHAR_END = "char_end"
    CHUNK_COUNT = "chunk_count"
    STATUS = "status"
    MODEL_ID = "model_id"
    DIMENSION = "dimension"
    SCHEMA_VERSION = "schema_version"
    EXTRA = "extra"
    # A document record's place in listings (integer-indexed, for an ordered scroll: docs/api.md).
    LIST_KEY = "list_key"
    # On the meta point: every document record carries LIST_KEY and the integer index exists.
    LISTING = "listing"
    # On the meta point: the collection's doc-id key (hex), made with the collection, never rotated.
    DOC_ID_KEY = "doc_id_key"


# acl_groups is not indexed: searches filter on readers, and only document listings filter on the
# groups, after kind == document has picked the records; one keyword index fewer to write and hold.
INDEXED_KEYWORDS = (Key.KIND, Key.DOC_ID, Key.READERS, Key.ROOT, Key.CONTENT_SHA256)
# 2: quarantined chunks are their own kind (was: kind=chunk plus quarantined=true). The
# quarantined flag early v2 builds still wrote is no longer written; nothing ever read it in
# v2, so v2 collections written with or without it read the same: no version change.
# 3: searchable chunks carry ``readers`` (their ACL groups), and the search filter asks for it
# alone, not for kind == chunk and the ACL groups: the engine then takes each of the caller's labels
# as an index lookup and checks nothing more per candidate (docs/design.md).
# A v2 collection has no ``readers``, so a search of this build would find nothing in it: it is
# refused, and re-ingested.
SCHEMA_VERSION = 3
CHUNK_KINDS = (Kind.CHUNK.value, Kind.QUARANTINED_CHUNK.value)


class SchemaVersionError(VectorIndexError):
    """The collection was written by a build with another payload layout."""

    def __init__(self, collection: str, stored: object) -> None:
        super().__init__(
            "open collection",
            f"collection {collection!r} has payload schema version {stored!r}, this build needs "
            f"{SCHEMA_VERSION}; re-ingest into a new collection",
        )


class ModelMismatchError(VectorIndexError):
    """The collection was built with another embedding model (or dimension)."""

    def __init__(self, collection: str, stored: str, wanted: str) -> None:
        super().__init__(
            "open collection",
            f"collection {collection!r} was built with embedding model {stored!r}, "
            f"but this process embeds with {wanted!r}; re-ingest into a new collection "
            f"or configure the same model (mixing models returns meaningless results)",
        )
        self.collection = collection
        self.stored = stored
        self.wanted = wanted


DOC_ID_KEY_BYTES = 32


def document_id(path: object, key: bytes | None) -> str:
    """A document's id, from its path: HMAC-SHA-256 under the collection's doc-id key, so an id (or a
    cursor) cannot confirm a guessed path offline. ``key`` None: the unkeyed hash of collections made
    before the key existed, kept for them so re-ingest stays idempotent (docs/security.md)."""
    material = f"file\x1f{path}".encode()
    if key is None:
        return hashlib.sha256(material).hexdigest()[:32]
    return hmac.new(key, material, hashlib.sha256).hexdigest()[:32]


LISTING_VERSION = 1
_LIST_KEY_BITS = 52  # exact as a float too (qdrant's range and order values), and collisions are rare


def list_key(doc_id: str) -> int:
    """Where a document comes in listings: listings are ordered by ``(list_key, doc_id)``."""
    digest = hashlib.sha256(doc_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - _LIST_KEY_BITS)


def chunk_point_id(doc_id: str, content_sha256: str, chunk_index: int) -> str:
    """Deterministic id: re-ingesting the same content writes the same ids."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"chunk\x1f{doc_id}\x1f{content_sha256}\x1f{chunk_index}"))


def document_point_id(doc_id: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"document\x1f{doc_id}"))


def model_fingerprint(model_id: str, dimension: int) -> str:
    return f"{model_id}@{dimension}"


def check_collection_meta(collection: str, meta: Mapping[str, Any], model_id: str, dimension: int) -> None:
    """Refuse a collection written with another payload schema or another embedding model."""
    if meta.get(Key.SCHEMA_VERSION) != SCHEMA_VERSION:
        raise SchemaVersionError(collection, meta.get(Key.SCHEMA_VERSION))
    stored = model_fingerprint(str(meta.get(Key.MODEL_ID)), int(meta.get(Key.DIMENSION, 0)))
    wanted = model_fingerprint(model_id, dimension)
    if stored != wanted:
        raise ModelMismatchError(collection, stored, wanted)
