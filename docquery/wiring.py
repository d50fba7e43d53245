"""Builds the component graph from settings, through registries keyed by settings.

The API's lifespan, the CLI and the ingest job all call ``build_components``;
tests pass their own components in. No module-level singletons.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from docquery.config.settings import Settings
from docquery.core.errors import ConfigError, VectorIndexUnreachable
from docquery.core.ports import Embedder, Generator, IndexAdapter, KeyProvider
from docquery.core.urls import public_url
from docquery.embedders.lazy import LazyEmbedder
from docquery.index.fusion import FusionParams
from docquery.index.tuning import IndexTuning
from docquery.rag.conversation import ConversationConfig
from docquery.rag.pipeline import RagPipeline, RetrievalConfig
from docquery.rag.sanitize import Sanitizer
from docquery.secrets import (
    EMBEDDER_API_KEY,
    LLM_API_KEY,
    QDRANT_API_KEY,
    SecretSource,
    build_secret_source,
    secret_getter,
)


# -- registries ----------------------------------------------------------------
def _local_embedder(s: Settings, keys: KeyProvider) -> Embedder:
    from docquery.embedders.local import LocalEmbedder

    return LocalEmbedder(batch_size=s.embedder.batch_size, precision=s.embedder.precision, workers=s.embedder.workers)


def _openai_embedder(s: Settings, keys: KeyProvider) -> Embedder:
    from docquery.embedders.remote import OpenAIEmbedder

    e = s.embedder
    if not e.base_url:
        raise ConfigError("DOCQUERY_EMBEDDER__BASE_URL is required when DOCQUERY_EMBEDDER__KIND=openai")
    return OpenAIEmbedder(
        base_url=e.base_url,
        model=e.model,
        api_key=keys,
        dimension=e.dimension,
        batch_size=e.batch_size,
        timeout_s=e.timeout_s,
        url_setting="DOCQUERY_EMBEDDER__BASE_URL",
    )


EMBEDDERS: dict[str, Callable[[Settings, KeyProvider], Embedder]] = {
    "local": _local_embedder,
    "openai": _openai_embedder,
}


def _edge_index(s: Settings, embedder: Embedder, name: str, keys: KeyProvider, create: bool) -> IndexAdapter:
    # ``create`` is the server's concern: a local shard is the caller's own directory (``ask`` refuses a
    # missing one before opening it; ``serve`` creates it and warns).
    from docquery.index import open_edge

    return open_edge(
        s.data_dir / "collections" / name,
        name=name,
        model_id=embedder.model_id,
        dimension=embedder.dimension,
        fusion=fusion_params(s),
        tuning=index_tuning(s),
    )


def _server_index(s: Settings, embedder: Embedder, name: str, keys: KeyProvider, create: bool) -> IndexAdapter:
    from docquery.index import open_server

    if not s.qdrant.url:
        raise ConfigError("DOCQUERY_QDRANT__URL is required for the server index")
    try:
        return open_server(
            url=s.qdrant.url,
            api_key=keys,
            name=name,
            model_id=embedder.model_id,
            dimension=embedder.dimension,
            fusion=fusion_params(s),
            timeout_s=s.qdrant.timeout_s,
            shard_number=s.qdrant.shard_number,
            replication_factor=s.qdrant.replication_factor,
            write_consistency_factor=s.qdrant.write_consistency_factor,
            tuning=index_tuning(s),
            create=create,
        )
    except VectorIndexUnreachable:
        shown = public_url(s.qdrant.url)
        where = f"at {shown} (DOCQUERY_QDRANT__URL)" if shown else "(DOCQUERY_QDRANT__URL is not a URL)"
        raise VectorIndexUnreachable(
            "open",
            f"no response from the Qdrant server {where}: check that the server is running and reachable "
            "from here, and that the URL is its scheme://host:port, e.g. http://qdrant:6333",
        ) from None


INDEXES: dict[str, Callable[[Settings, Embedder, str, KeyProvider, bool], IndexAdapter]] = {
    "edge": _edge_index,
    "server": _server_index,
}


def _extractive(s: Settings, keys: KeyProvider) -> Generator:
    from docquery.generators.extractive import ExtractiveGenerator

    return ExtractiveGenerator()


def _openai_chat(s: Settings, keys: KeyProvider) -> Generator:
    from docquery.generators.openai_chat import OpenAIChatGenerator

    if not s.llm.base_url:
        raise ConfigError("DOCQUERY_LLM__BASE_URL is required for the chat generator")
    return OpenAIChatGenerator(
        base_url=s.llm.base_url,
        model=s.llm.model,
        api_key=keys,
        connect_timeout_s=s.llm.connect_timeout_s,
        read_timeout_s=s.llm.read_timeout_s,
        total_timeout_s=s.llm.total_timeout_s,
        max_concurrency=s.llm.max_concurrency,
        max_retries=s.llm.max_retries,
        max_tokens=s.llm.max_tokens,
        temperature=s.llm.temperature,
    )


GENERATORS: dict[str, Callable[[Settings, KeyProvider], Generator]] = {
    "extractive": _extractive,
    "openai": _openai_chat,
}


def index_kind(s: Settings) -> str:
    return "server" if s.qdrant.url else "edge"


def generator_kind(s: Settings) -> str:
    return "openai" if s.llm.base_url else "extractive"


def fusion_params(s: Settings) -> FusionParams:
    fields = {"rrf_k", "dense_weight", "sparse_weight", "prefetch_limit"}
    return FusionParams(method=s.retrieval.fusion, **s.retrieval.model_dump(include=fields))


def index_tuning(s: Settings) -> IndexTuning:
    """Every IndexTuning field that the qdrant settings name; the rest keep their defaults."""
    return IndexTuning(**s.qdrant.model_dump(include={f.name for f in dataclasses.fields(IndexTuning)}))


# -- the graph -----------------------------------------------------------------
@dataclass
class Components:
    settings: Settings
    embedder: Embedder
    index: IndexAdapter
    generator: Generator
    pipeline: RagPipeline
    secrets: SecretSource

    def close(self) -> None:
        self.index.close()
        self.embedder.close()  # worker threads, HTTP pools

    async def release_loop_resources(self) -> None:
        """Release what belongs to the running event loop (the HTTP clients' connection pools).

        Call it before that loop ends; the components stay usable from another loop.
        """
        await self.generator.aclose()
        await self.embedder.aclose()
        await self.index.aclose()


def _no_key() -> None:
    return None


def build_embedder(settings: Settings, secrets: SecretSource | None = None, *, lazy: bool = False) -> Embedder:
    """``lazy``: the local model loads on first use (docquery/embedders/lazy.py), so the index opens first."""
    source = secrets or build_secret_source(settings)
    make = EMBEDDERS[settings.embedder.kind]
    keys = secret_getter(source, EMBEDDER_API_KEY)
    if lazy and settings.embedder.kind == "local":
        from docquery.embedders.lazy import local_model_spec

        model_id, dimension = local_model_spec()
        return LazyEmbedder(model_id, dimension, lambda: make(settings, keys))
    return make(settings, keys)


def build_index(
    settings: Settings,
    embedder: Embedder,
    *,
    collection: str | None = None,
    secrets: SecretSource | None = None,
    create: bool = True,
) -> IndexAdapter:
    """Open (or create) the collection; wire envelope encryption when it is on.

    ``create=False`` (the query side) never creates a collection on a Qdrant server: its key may only
    read, and a missing one is ``CollectionMissingError`` (run the ingest first).

    The wrapped data keys live in the collection's meta point, so the cipher is
    attached after the index is open: ingest records each new wrapped key there
    before its first ciphertext is written; the query side reads them back.
    """
    kind = index_kind(settings)
    # The embedded engine takes no key, so it needs no secret source (a Vault KV path, say).
    keys = secret_getter(secrets or build_secret_source(settings), QDRANT_API_KEY) if kind == "server" else _no_key
    index = INDEXES[kind](settings, embedder, collection or settings.qdrant.collection, keys, create)
    if settings.encryption.enabled:
        from docquery.secrets.crypto import build_envelope_cipher, key_map_from_meta, meta_fields_for

        try:
            cipher = build_envelope_cipher(
                settings,
                on_new_key=lambda record: index.update_meta(meta_fields_for(record)),
                key_map=lambda: key_map_from_meta(index.read_meta()),
            )
        except Exception:
            index.close()
            raise
        index.set_cipher(cipher)
    return index


def build_components(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    index: IndexAdapter | None = None,
    generator: Generator | None = None,
    collection: str | None = None,
    secrets: SecretSource | None = None,
    lazy_model: bool = False,
    create_index: bool = True,
) -> Components:
    # Keys are read through the secret source on every call, so a rotated
    # Vault-rendered file takes effect without a restart.
    secrets = secrets or build_secret_source(settings)
    if embedder is None:
        # The index opens before the model loads: a locked or mismatched index fails fast.
        embedder = build_embedder(settings, secrets, lazy=True)
        opened = index is None
        index = index or build_index(settings, embedder, collection=collection, secrets=secrets, create=create_index)
        if not lazy_model and isinstance(embedder, LazyEmbedder):
            try:
                embedder = embedder.load()
            except Exception:
                if opened:
                    index.close()
                raise
    index = index or build_index(settings, embedder, collection=collection, secrets=secrets, create=create_index)
    generator = generator or GENERATORS[generator_kind(settings)](settings, secret_getter(secrets, LLM_API_KEY))
    pipeline = RagPipeline(
        embedder=embedder,
        index=index,
        generator=generator,
        sanitizer=Sanitizer(settings.api.link_allowlist),
        retrieval=RetrievalConfig(mode=settings.retrieval.mode, min_dense_score=settings.retrieval.min_dense_score),
        conversation=ConversationConfig(
            max_turns=settings.conversation.max_history_turns,
            max_chars=settings.conversation.max_history_chars,
            max_question_chars=settings.api.max_question_chars,
        ),
    )
    return Components(
        settings=settings,
        embedder=embedder,
        index=index,
        generator=generator,
        pipeline=pipeline,
        secrets=secrets,
    )
