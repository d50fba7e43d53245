"""Narrow ports. ``rag/`` depends on these and on ``domain``, never on a vendor SDK."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import SecretStr

from docquery.core.domain import AclFilter, Chunk, DocumentRecord, Hit, IndexedChunk, Prompt, QuarantinedChunk
from docquery.core.uploads import UploadOutcome, UploadTask

SearchMode = Literal["dense", "sparse", "hybrid"]
# Reads a credential through the secret source on every call, so a rotated file is used at once.
KeyProvider = Callable[[], SecretStr | None]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into dense vectors. ``model_id`` is stored with the collection.

    ``embed`` blocks (ingest calls it from its worker threads); ``aembed`` is what the
    query path awaits: a network call, or the local model behind one thread hand-off.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]: ...

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]: ...

    def close(self) -> None:
        """Stop worker threads and close connection pools."""
        ...

    async def aclose(self) -> None:
        """Release what belongs to the running event loop; the embedder stays usable from another."""
        ...


@runtime_checkable
class VectorIndex(Protocol):
    """Chunk storage and ACL-filtered search. The ACL filter runs inside the query.

    ``search`` is awaited on the event loop; each engine runs its query as it must
    behind the index (a network wait for a server, an in-process call for Edge).
    """

    def upsert(self, chunks: Sequence[IndexedChunk]) -> None: ...

    async def search(
        self,
        *,
        dense: Sequence[float] | None,
        text: str | None,
        acl: AclFilter,
        limit: int,
        mode: SearchMode = "hybrid",
    ) -> list[Hit]: ...

    def delete_chunks(self, doc_id: str, *, keep_ids: Sequence[str] = ()) -> int: ...


class Generator(Protocol):
    """Writes the answer from a prompt. ``stream`` yields text deltas.

    ``mode`` is ``"generative"`` for an LLM and ``"extractive"`` for the
    no-LLM fallback that quotes the best passages.
    """

    @property
    def model(self) -> str: ...

    @property
    def mode(self) -> Literal["generative", "extractive"]: ...

    async def complete(self, prompt: Prompt) -> str: ...

    def stream(self, prompt: Prompt) -> AsyncIterator[str]: ...

    async def aclose(self) -> None:
        """Release what belongs to the running event loop; the generator stays usable from another."""
        ...


class TextCipher(Protocol):
    """Encrypts chunk text at rest (envelope encryption). Ingest encrypts, query decrypts."""

    # ``aad`` binds the ciphertext to its point (pass the point id): a ciphertext copied
    # onto another point, e.g. one with a wider ACL, then fails instead of decrypting.
    def encrypt(self, plaintext: str, *, aad: str = "") -> str: ...

    def decrypt(self, token: str, *, aad: str = "") -> str: ...


class DocumentCatalog(Protocol):
    """Per-document records kept in the same collection (kind=document)."""

    def get_document(self, doc_id: str) -> DocumentRecord | None: ...

    def put_document(self, record: DocumentRecord) -> None: ...

    def put_documents(self, records: Sequence[DocumentRecord]) -> None:
        """Several records in one write (ingest writes two per document)."""
        ...

    def delete_document(self, doc_id: str) -> int: ...

    def list_documents(
        self, *, acl: AclFilter | None = None, root: str | None = None, extra: tuple[str, str] | None = None
    ) -> list[DocumentRecord]:
        """Records ``acl`` may see, under ``root``, whose ``extra`` holds the (key, value) pair ``extra``."""
        ...

    def doc_id_key(self) -> bytes | None: ...

    def ensure_doc_id_key(self) -> bytes | None: ...

    def list_page(
        self, *, acl: AclFilter, after: str | None, limit: int, title: str | None = None
    ) -> tuple[list[DocumentRecord], bool]: ...

    def set_document_acl(self, doc_id: str, acl_groups: Sequence[str]) -> None: ...

    def list_quarantined(
        self, *, acl: AclFilter, after: str | None, limit: int, doc_id: str | None = None
    ) -> tuple[list[QuarantinedChunk], str | None]:
        """Up to ``limit`` quarantined chunks of documents ``acl`` may see (of ``doc_id`` alone, when given),
        in point-id order from the position ``after`` on, and the position of the next page (None: the end)."""
        ...


class IndexAdapter(VectorIndex, DocumentCatalog, Protocol):
    """What both Qdrant backends (embedded Edge, server) offer: both ports plus lifecycle."""

    name: str

    def count_chunks(self, doc_id: str | None = None) -> int: ...

    def chunk_ids(self, doc_id: str) -> list[str]: ...

    def read_passages(self, doc_id: str, chunk_indexes: Sequence[int], acl: AclFilter) -> dict[int, Chunk]:
        """The document's searchable chunks at these indexes that ``acl`` may read (the filter inside the query)."""
        ...

    def read_meta(self) -> dict[str, Any] | None: ...

    def update_meta(self, fields: Mapping[str, Any]) -> None: ...

    def set_cipher(self, cipher: TextCipher | None) -> None: ...

    def optimize(self) -> bool: ...

    def ready(self) -> bool: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    async def aclose(self) -> None:
        """Release what belongs to the running event loop; the index stays usable from another."""
        ...


class UploadProcessor(Protocol):
    """Indexes one spooled upload through ingest's pipeline (the ``docquery.workers`` entry point ``upload``
    builds it with the service's own index and embedder; docs/design.md, "Uploads")."""

    def process(self, tasks: Sequence[UploadTask], stop: threading.Event) -> list[UploadOutcome]:
        """Indexes a batch in one pipeline run and blocks until it ends: one outcome per task, in order. ``stop``
        set (the service stopping) ends the documents not yet indexed as ``interrupted`` at the next point the
        pipeline checks. Raises only for an index failure (the records then stay unfinished)."""
        ...

    def ready(self) -> bool:
        """Whether a batch would start at once (ingest's parse process is started ahead of it); reported by
        ``/readyz``, never required."""
        ...

    def close(self) -> None: ...


# The factory the ``upload`` entry point names: (settings, index, embedder) -> processor.
UploadProcessorFactory = Callable[[Any, IndexAdapter, Embedder], UploadProcessor]
