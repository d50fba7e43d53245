"""The API test harness: the real app on an embedded Edge index with the fast HashEmbedder.

The fixtures over it are in tests/api/conftest.py.

Components are passed into ``create_app`` (no lifespan building). Credentials
are real: hashed API keys in ``api-keys.json`` and RS256 JWTs against a
``jwks.json``, both in a temporary secrets dir.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from docquery.api.app import create_app
from docquery.config.settings import Settings
from docquery.core.domain import Chunk, DocumentRecord, IndexedChunk
from docquery.core.ports import Generator, UploadProcessorFactory
from docquery.generators.openai_chat import OpenAIChatGenerator
from docquery.index import QdrantIndex, open_edge
from docquery.wiring import Components, build_components
from tests.support.fakes import HashEmbedder
from tests.support.standins.openai_server import DEFAULT_KEY, StandInOpenAIServer

ISSUER = "https://idp.test.example"
AUDIENCE = "docquery-api"
KID = "test-key-1"

# token -> (id, groups, roles)
KEYS: dict[str, tuple[str, list[str], list[str]]] = {
    "tok-alice-eng": ("alice", ["eng"], ["query"]),
    "tok-bob-hr": ("bob", ["hr"], ["query"]),
    "tok-root-admin": ("root", ["eng", "hr"], ["query", "admin"]),
    "tok-norole": ("norole", ["eng"], []),
    "tok-nogroups": ("nogroups", [], ["query"]),
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def write_api_keys(secrets_dir: Path, keys: dict[str, tuple[str, list[str], list[str]]]) -> None:
    entries = [
        {"id": kid, "sha256": hashlib.sha256(tok.encode()).hexdigest(), "groups": groups, "roles": roles}
        for tok, (kid, groups, roles) in keys.items()
    ]
    (secrets_dir / "api-keys.json").write_text(json.dumps(entries))


@dataclass
class JwtIssuer:
    """Signs tokens with a private key whose public half is in the secrets dir's jwks.json."""

    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": KID, "use": "sig", "alg": "RS256"})
        return {"keys": [jwk]}

    def token(self, key: rsa.RSAPrivateKey | None = None, kid: str = KID, **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "sub": "user-1",
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now - 5,
            "exp": now + 300,
            "groups": ["eng"],
            "roles": ["query"],
        }
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid})


def api_settings(tmp: Path, secrets_dir: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "data_dir": tmp / "data",
        "secrets_dir": secrets_dir,
        "auth": {"jwt_issuer": ISSUER, "jwt_audience": AUDIENCE, "jwt_leeway_s": 0},
        "retrieval": {"min_dense_score": 0.2},
        # No parse process waiting beside each harness (seconds of CPU each); tests/integration and the
        # served tests keep the default.
        "uploads": {"parse_ahead": False},
        "api": {
            "rate_limit_per_minute": 100_000,
            "rate_limit_burst": 100_000,
            "auth_failures_per_minute": 100_000,
            "auth_failure_burst": 100_000,
        },
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return Settings(**base)


class Corpus:
    """Writes chunks and document records straight into the index (what ingest would write)."""

    def __init__(self, index: QdrantIndex, embedder: HashEmbedder) -> None:
        self.index = index
        self.embedder = embedder
        self.docs: dict[str, tuple[str, ...]] = {}  # doc_id -> acl_groups
        self.chunk_doc: dict[str, str] = {}  # chunk id -> doc_id

    def add(self, doc_id: str, texts: Sequence[str], groups: Sequence[str], title: str = "") -> list[str]:
        vectors = self.embedder.embed(list(texts))
        items = []
        ids = []
        for i, (text, vec) in enumerate(zip(texts, vectors, strict=True)):
            cid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc_id}/{i}"))
            ids.append(cid)
            self.chunk_doc[cid] = doc_id
            chunk = Chunk(
                id=cid,
                doc_id=doc_id,
                source=f"{doc_id}.md",
                title=title or doc_id,
                chunk_index=i,
                text=text,
                content_sha256=hashlib.sha256(" ".join(texts).encode()).hexdigest(),
                acl_groups=tuple(groups),
            )
            items.append(IndexedChunk(chunk=chunk, dense=vec))
        self.index.upsert(items)
        self.index.put_document(
            DocumentRecord(
                doc_id=doc_id,
                source=f"{doc_id}.md",
                root="/corpus",
                content_sha256="0" * 64,
                chunk_count=len(texts),
                acl_groups=tuple(groups),
                title=title or doc_id,
            )
        )
        self.docs[doc_id] = tuple(groups)
        return ids


@dataclass
class Harness:
    app: FastAPI
    client: TestClient
    corpus: Corpus
    settings: Settings
    components: Components
    secrets_dir: Path


def llm_generator(server: StandInOpenAIServer, **kw: Any) -> Generator:
    params: dict[str, Any] = {"max_retries": 0, "read_timeout_s": 5.0, "total_timeout_s": 10.0, "max_concurrency": 8}
    params.update(kw)
    return OpenAIChatGenerator(
        base_url=server.base_url,
        model="standin-model",
        api_key=lambda: SecretStr(DEFAULT_KEY),
        connect_timeout_s=1.0,
        **params,
    )


def make_harness(
    tmp: Path,
    *,
    generator: Generator | None = None,
    jwks: dict[str, Any] | None = None,
    embedder: HashEmbedder | None = None,
    upload_processor: UploadProcessorFactory | None = None,
    **overrides: Any,
) -> Iterator[Harness]:
    secrets_dir = tmp / "secrets"
    secrets_dir.mkdir(exist_ok=True)
    write_api_keys(secrets_dir, KEYS)
    if jwks is not None:
        (secrets_dir / "jwks.json").write_text(json.dumps(jwks))
    settings = api_settings(tmp, secrets_dir, **overrides)
    embedder = embedder or HashEmbedder()
    index = open_edge(tmp / "index", name="api-test", model_id=embedder.model_id, dimension=embedder.dimension)
    components = build_components(settings, embedder=embedder, index=index, generator=generator)
    app = create_app(settings, components=components, upload_processor=upload_processor)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Harness(app, client, Corpus(index, embedder), settings, components, secrets_dir)
    finally:
        index.close()


def sse_events(body: str) -> list[tuple[str, Any]]:
    """Parse ``event:``/``data:`` SSE frames (DocQuery's /v1/query stream)."""
    out = []
    for frame in body.strip().split("\n\n"):
        event, data = "message", ""
        for line in frame.splitlines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
        if data:
            out.append((event, json.loads(data)))
    return out


def chat_stream_text(body: str) -> tuple[str, list[dict[str, Any]]]:
    """Concatenate the content deltas of an OpenAI chat stream; return (text, raw chunks)."""
    text, chunks = "", []
    for line in body.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        chunks.append(chunk)
        for choice in chunk.get("choices", []):
            text += choice.get("delta", {}).get("content") or ""
    return text, chunks
