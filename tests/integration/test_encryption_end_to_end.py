"""Encryption at rest through the real wiring: ingest encrypts, query decrypts, disk holds no plaintext.

Real OpenBao (Transit, JWT login as the ingest and query workloads with the
policies from policies/vault) and the real embedded Qdrant engine.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from docquery.config.settings import Settings
from docquery.core.collection import chunk_point_id
from docquery.core.domain import AclFilter, Chunk, IndexedChunk
from docquery.secrets.crypto import DecryptionError, EnvelopeCipher
from docquery.wiring import build_index
from tests.support.fakes import HashEmbedder

if TYPE_CHECKING:
    from tests.support.openbao import Bao


def _settings(bao: Bao, tmp_path: Path, workload: str) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        secrets_dir=tmp_path / "secrets",
        encryption={"enabled": True, "vault_url": bao.url, "transit_key": "docquery"},
        vault={
            "url": bao.url,
            "auth_method": "jwt",
            "auth_mount": "jwt",
            "role": f"docquery-{workload}",
            "jwt_path": str(bao.write_sa_jwt(f"docquery-{workload}")),
        },
    )


def _chunk(text: str, doc_id: str = "doc-1") -> IndexedChunk:
    embedder = HashEmbedder()
    sha = uuid.uuid4().hex
    chunk = Chunk(
        id=chunk_point_id(doc_id, sha, 0),
        doc_id=doc_id,
        source="secret.txt",
        title="Secret",
        chunk_index=0,
        text=text,
        content_sha256=sha,
        acl_groups=("finance",),
    )
    return IndexedChunk(chunk=chunk, dense=embedder.embed([text])[0])


def test_chunk_text_is_encrypted_at_rest_and_readable_by_the_query_workload(bao: Bao, tmp_path: Path) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    text = f"The merger code name is {canary} and it closes in March."
    ingest = build_index(_settings(bao, tmp_path, "ingest"), HashEmbedder())
    ingest.upsert([_chunk(text)])
    meta = ingest.read_meta() or {}
    assert any(k.startswith("wrapped_key:") for k in meta), "the wrapped data key is stored with the collection"
    assert all(canary not in str(v) for v in meta.values())
    ingest.close()

    raw = b"".join(p.read_bytes() for p in (tmp_path / "data").rglob("*") if p.is_file())
    assert canary.encode() not in raw, "plaintext chunk text found in the Qdrant storage directory"
    assert b"dqenc:v1:" in raw  # the scan does see payload bytes

    query = build_index(_settings(bao, tmp_path, "query"), HashEmbedder())
    hits = asyncio.run(
        query.search(
            dense=HashEmbedder().embed(["merger code name"])[0],
            text="merger code name",
            acl=AclFilter.for_groups({"finance"}),
            limit=3,
        )
    )
    query.close()
    assert [h.chunk.text for h in hits] == [text]


def test_ciphertext_moved_to_another_point_does_not_decrypt(bao: Bao, tmp_path: Path) -> None:
    index = build_index(_settings(bao, tmp_path, "ingest"), HashEmbedder())
    cipher = index._cipher  # type: ignore[attr-defined]
    assert isinstance(cipher, EnvelopeCipher)
    token = cipher.encrypt("restricted text", aad="point-a")
    index.close()
    with pytest.raises(DecryptionError):
        cipher.decrypt(token, aad="point-b")
