"""Narrow ports. ``rag/`` depends on these and on ``domain``, never on a vendor SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from docquery.domain import AclFilter, DocumentRecord, Hit, IndexedChunk, Prompt

SearchMode = Literal["dense", "sparse", "hybrid"]


@runtime_checkable
class Embedder(Protocol):
    """Turns text into dense vectors. ``model_id`` is stored with the collection."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]: ...


@runtime_checkable
class AsyncEmbedder(Embedder, Protocol):
    """An embedder whose work is a network call: the query path awaits it on the event loop."""

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Chunk storage and ACL-filtered search. The ACL filter runs inside the query.

    ``search_releases_gil`` says where the query path runs ``search``. True for a
    client that waits on the network (Qdrant server): on a worker thread. False for
    an engine that computes in this process holding the GIL for the whole query
    (embedded Edge): a worker thread would not free the event loop, only add two
    thread hand-offs, so the call is made directly (``rag.pipeline``).
    """

    search_releases_gil: bool

    def upsert(self, chunks: Sequence[IndexedChunk]) -> None: ...

    def search(
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

    def list_documents(self, *, acl: AclFilter | None = None, root: str | None = None) -> list[DocumentRecord]: ...

    def set_document_acl(self, doc_id: str, acl_groups: Sequence[str]) -> None: ...


class IndexAdapter(VectorIndex, DocumentCatalog, Protocol):
    """What both Qdrant backends (embedded Edge, server) offer: both ports plus lifecycle."""

    name: str

    def count_chunks(self, doc_id: str | None = None) -> int: ...

    def chunk_ids(self, doc_id: str) -> list[str]: ...

    def read_meta(self) -> dict[str, Any] | None: ...

    def update_meta(self, fields: Mapping[str, Any]) -> None: ...

    def set_cipher(self, cipher: TextCipher | None) -> None: ...

    def optimize(self) -> bool: ...

    def ready(self) -> bool: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...
