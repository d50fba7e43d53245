"""DocQuery settings: one nested pydantic-settings model.

Precedence (highest first): keyword arguments (tests, the CLI's flags), then environment
variables ``DOCQUERY_*`` with ``__`` nesting, then field defaults.

The model holds no secret. Credentials (``llm-api-key``, ``qdrant-api-key``, ...) are read
through :mod:`docquery.secrets` on every use, from files, Vault or (dev only) env vars, so
a rotated key takes effect without a restart and there is one way to read a secret.

A ``DOCQUERY_*`` variable that names no setting, or a key of a section's JSON value that names
no field, is a warning naming the closest real one, and an error in the prod profile: a misspelt
setting must not be silently ignored.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as _SourceError

from docquery.config.describe import describe_source_error, describe_validation_error
from docquery.config.envvars import ENV_PREFIX, NESTED_DELIMITER, unknown_env_vars
from docquery.core.collection import COLLECTION_NAME_RULE, is_valid_collection_name
from docquery.core.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_SECRETS_DIR = "/vault/secrets"


class Profile(StrEnum):
    DEV = "dev"
    PROD = "prod"


class SettingsError(ConfigError, ValueError):
    """A configuration problem; the message names the setting, never its value."""


class _Section(BaseModel):
    # Each field's docstring is its description: docs/settings.md is generated from them.
    model_config = ConfigDict(use_attribute_docstrings=True)


class QdrantSettings(_Section):
    url: str | None = None
    """Qdrant server URL (e.g. `https://qdrant:6333`). Unset: the embedded engine under `data_dir`.
    Its key is the secret `qdrant-api-key`, read on every request."""
    collection: str = "docquery"
    """Collection name, for ingest and queries alike: 1 to 64 letters, digits, `-` or `_`, starting with a letter
    or digit."""
    timeout_s: float = 10.0
    """Timeout of one Qdrant server request, in seconds."""
    shard_number: int = Field(default=1, ge=1)
    """Shards of a collection the server adapter creates."""
    replication_factor: int = Field(default=1, ge=1)
    """Replicas of each shard, for a collection the server adapter creates."""
    write_consistency_factor: int = Field(default=1, ge=1)
    """Replicas that must confirm a write, for a collection the server adapter creates."""
    hnsw_m: int = Field(default=16, ge=4, le=128)
    """HNSW links per node, for a collection this build creates (an existing one keeps its own;
    docs/design.md)."""
    hnsw_ef_construct: int = Field(default=100, ge=4, le=1000)
    """HNSW candidates while building the graph, for a collection this build creates."""
    hnsw_ef: int | None = Field(default=None, ge=1, le=4096)
    """HNSW candidates per search (unset: the engine's default); applies to every search."""
    full_scan_threshold_kb: int = Field(default=100_000, ge=0)
    """Below this much vector data in a filtered scope, a search scores every candidate from the payload index
    exactly instead of walking the graph."""
    quantization: Literal["int8", "turbo4", "none"] = "int8"
    """Dense vectors kept quantized in RAM for search, rescored on the originals, for a collection this build
    creates: `int8` scalars, `turbo4` (TurboQuant, 4 bits a dimension: half the RAM of the int8 copies; a
    Qdrant server needs 1.18 or later), or `none` (docs/design.md)."""
    oversampling: float = Field(default=2.0, ge=1.0, le=16.0)
    """Candidates fetched from the quantized vectors per result, before rescoring on the originals; applies to
    every search. A hybrid search's dense prefetch (100 for a top 10) is rescored at its own depth, which already
    holds `limit x OVERSAMPLING` (docs/design.md)."""
    indexing_threshold_kb: int = Field(default=10_000, ge=1)
    """A segment with less unindexed vector data than this is not rebuilt by the end-of-run optimize. At least 1:
    Qdrant reads 0 as "never index"."""
    max_segment_size_kb: int = Field(default=200_000, ge=1_000)
    """Largest segment the optimizer builds by merging; the embedded engine also seals (indexes) its
    appendable segment once a write fills one of this size."""

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, value: str) -> str:
        # Also a path segment under data_dir: a name such as "../x" must never be used.
        if not is_valid_collection_name(value):
            raise ValueError(f"DOCQUERY_QDRANT__COLLECTION must be {COLLECTION_NAME_RULE}")
        return value

    @model_validator(mode="after")
    def _segment_bounds(self) -> QdrantSettings:
        # optimize() indexes only segments past the indexing threshold, so a full segment below it
        # would never be sealed and would grow without bound.
        if self.indexing_threshold_kb > self.max_segment_size_kb:
            raise ValueError(
                "DOCQUERY_QDRANT__INDEXING_THRESHOLD_KB is larger than DOCQUERY_QDRANT__MAX_SEGMENT_SIZE_KB;"
                " set it to at most the segment size"
            )
        return self


EmbedderPrecision = Literal["auto", "float32", "bfloat16"]


class EmbedderSettings(_Section):
    kind: Literal["local", "openai"] = "local"
    """`local`: the bundled all-MiniLM-L6-v2 in-process. `openai`: an OpenAI-compatible `/v1/embeddings` server."""
    base_url: str | None = None
    """For `kind=openai`: the server's `/v1` base URL (vLLM `--task embed`, TEI, ...). Its key is the secret
    `embedder-api-key`."""
    model: str = "all-MiniLM-L6-v2"
    """Model name; recorded in the collection, which refuses another model's vectors."""
    dimension: int | None = None
    """For `kind=openai`: the vector size, when the server cannot be probed for it."""
    batch_size: int = Field(default=32, ge=1, le=4096)
    """Texts per forward pass (local) or per request (openai); docs/design.md says why."""
    timeout_s: float = 30.0
    """For `kind=openai`: timeout of one embedding request, in seconds."""
    precision: EmbedderPrecision = "auto"
    """For `kind=local`: `auto` uses bfloat16 where the CPU has it natively (AMX, AVX512-BF16), else float32.
    Vectors agree either way, so changing it never needs re-embedding."""
    workers: int = Field(default=0, ge=0, le=64)
    """For `kind=local` on CPU: threads that share one long embed call; 0 = one per usable core, at most 4."""
    tune_malloc: bool = True
    """Bulk commands (ingest, eval) keep freed memory in the process so torch's buffers are reused; the
    server never does. (torch's kernel caches are bounded in every process that embeds, whatever this says.)"""


class LLMSettings(_Section):
    base_url: str | None = None
    """OpenAI-compatible base URL of the LLM (e.g. `http://vllm:8000/v1`). Unset: extractive answers, no LLM.
    Its key is the secret `llm-api-key`, read on every call."""
    model: str = "docquery-llm"
    """Served model name sent with each request."""
    connect_timeout_s: float = 3.0
    """Time to connect to the LLM, in seconds."""
    read_timeout_s: float = 60.0
    """Longest wait between two bytes of the LLM's answer, in seconds."""
    total_timeout_s: float = 120.0
    """Longest time for a whole LLM call, in seconds."""
    max_concurrency: int = Field(default=16, ge=1)
    """LLM calls in flight at once; one more fails at once with 503 and `Retry-After`."""
    max_retries: int = Field(default=2, ge=0, le=5)
    """Retries of an LLM call that failed with a retryable error (connection refused, overloaded)."""
    max_tokens: int = Field(default=512, ge=1)
    """Most tokens the LLM may generate per answer."""
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)
    """Sampling temperature sent to the LLM."""


class RetrievalSettings(_Section):
    mode: Literal["dense", "sparse", "hybrid"] = "hybrid"
    """Search with dense vectors, BM25 sparse vectors, or both fused."""
    top_k: int = Field(default=5, ge=1, le=50)
    """Passages per answer when the request does not say."""
    max_top_k: int = Field(default=50, ge=1, le=200)
    """Largest `top_k` a request may ask for."""
    prefetch_limit: int = Field(default=100, ge=1, le=1000)
    """Candidates each branch of a hybrid search fetches before fusion (docs/design.md)."""
    fusion: Literal["dbsf", "rrf", "convex"] = "dbsf"
    """How hybrid search fuses its branches: `dbsf` (inside Qdrant), `rrf` or `convex`."""
    rrf_k: int = Field(default=60, ge=1)
    """The `k` of reciprocal rank fusion."""
    dense_weight: float = Field(default=1.0, ge=0.0)
    """Weight of the dense branch, for `rrf` and `convex`."""
    sparse_weight: float = Field(default=1.0, ge=0.0)
    """Weight of the sparse branch, for `rrf` and `convex`."""
    min_dense_score: float = Field(default=0.30, ge=-1.0, le=1.0)
    """Dense cosine below which a question counts as "not in the documents": a refusal, no citations."""

    @model_validator(mode="after")
    def _top_k_within_bound(self) -> RetrievalSettings:
        # A default above the bound every request is held to was quietly cut to it (a new user's finding).
        if self.top_k > self.max_top_k:
            raise ValueError(
                f"DOCQUERY_RETRIEVAL__TOP_K ({self.top_k}) is larger than DOCQUERY_RETRIEVAL__MAX_TOP_K"
                f" ({self.max_top_k}); set it to at most that"
            )
        return self


class ConversationSettings(_Section):
    """Earlier turns of a conversation (``history`` on /v1/query, ``messages`` on the OpenAI facade)."""

    max_history_turns: int = Field(default=8, ge=0, le=64)
    """Earlier turns taken into account. /v1/query refuses more (422); the chat facade keeps the most recent
    turns within both bounds, since chat clients resend the whole conversation. 0: follow-ups are not used."""
    max_history_chars: int = Field(default=4000, ge=0, le=100_000)
    """Characters over all kept turns: bounds the condense prompt and the extractive query."""


class AuthSettings(_Section):
    api_keys_file: str = "api-keys.json"
    """Secret file (in the secrets dir, or Vault key) listing the API keys by SHA-256, with groups and roles."""
    jwks_file: str = "jwks.json"
    """Secret file with the identity provider's JWKS, for OIDC bearer tokens."""
    jwt_issuer: str | None = None
    """Required `iss` of a JWT; JWTs are refused while unset."""
    jwt_audience: str | None = None
    """Required `aud` of a JWT; JWTs are refused while unset."""
    jwt_groups_claim: str = "groups"
    """JWT claim that lists the caller's groups (the ACL). Each value is matched exactly as issued; one that is
    not a valid group name (whitespace, controls, empty) grants nothing (docs/api.md, "Groups and the ACL")."""
    jwt_groups_string: Literal["list", "one", "space", "comma"] = "list"
    """How a groups or roles claim that is a string is read: `list` = not at all (only a JSON list grants), `one` =
    the whole string is one value, `space` = split on spaces, `comma` = split on commas (nothing is trimmed)."""
    jwt_tenant_claim: str | None = None
    """JWT claim naming the caller's tenant, whose LLM share it draws on (dotted paths allowed). Unset, or absent
    from a token: the caller's set of groups is its tenant."""
    jwt_roles_claim: str = "roles"
    """JWT claim that lists the caller's roles (`query`, `ingest`, `admin`)."""
    jwt_may_grant_claim: str = "may_grant"
    """JWT claim listing groups the caller may give an uploaded document besides its own (read like the groups
    claim)."""
    jwt_algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"])
    """Signature algorithms a JWT may use; never `none` or HMAC."""
    jwt_leeway_s: int = Field(default=30, ge=0, le=300)
    """Clock skew allowed on `exp` and `nbf`, in seconds."""
    jwt_max_lifetime_s: int = Field(default=86_400, ge=60)
    """Longest a JWT may still be valid for: one whose `exp` is further from now is refused, so a leaked token
    cannot be a standing key (identity providers issue minutes to hours)."""


class ApiSettings(_Section):
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)
    """Largest request body; larger gets 413."""
    max_question_chars: int = Field(default=2000, ge=1)
    """Longest question; longer gets 422."""
    rate_limit_per_minute: int = Field(default=60, ge=1)
    """Requests per minute per principal; more get 429 with `Retry-After`."""
    rate_limit_burst: int = Field(default=20, ge=1)
    """Requests a principal may send at once above the steady rate."""
    link_allowlist: list[str] = Field(default_factory=list, examples=[["example.com"]])
    """Hosts that links in answers may point to (JSON list). Empty: every link is rendered inert."""
    head_timeout_s: float = Field(default=10.0, gt=0)
    """Seconds a client has to send the request head, from its first byte (slow clients get 408)."""
    body_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds a client has to send the request body, from the end of the head (408 past it)."""
    keepalive_timeout_s: float = Field(default=5.0, gt=0)
    """Seconds an idle keep-alive connection (no request in progress) stays open."""
    send_timeout_s: float = Field(default=30.0, gt=0)
    """Seconds a response may wait on a client that has stopped reading it (its send buffer full) before the
    connection is cut: a stream held that way would keep its LLM slot."""
    max_connections: int = Field(default=512, ge=1)
    """Open connections at most; past it the longest-idle one is closed, or 503 when none is idle."""
    max_head_bytes: int = Field(default=16 * 1024, ge=1024)
    """Largest request line plus headers, however they arrive (431 past it)."""
    llm_share: float = Field(default=0.25, gt=0, le=1)
    """Share of `llm.max_concurrency` a tenant is held to while another tenant waits for a slot (at least one
    call). While slots are free a tenant may borrow them all (docs/api.md, "Fair share")."""
    llm_queue: int = Field(default=64, ge=0)
    """Requests that may wait for an LLM slot when every slot is busy; past it, 503 with `Retry-After`."""
    llm_queue_wait_s: float = Field(default=2.0, ge=0)
    """Longest a request waits for an LLM slot, in seconds; then 503 with `Retry-After`."""
    auth_failures_per_minute: int = Field(default=10, ge=1)
    """Failed authentications per client address per minute; past it the address gets 429 for every credential,
    valid or not, so the answer reveals nothing about the credential."""
    auth_failure_burst: int = Field(default=20, ge=1)
    """Failed authentications a client address may make at once above the steady rate."""
    cursor_ttl_s: int = Field(default=3600, ge=60)
    """Seconds a listing's `next_cursor` stays valid (sealed with the secret `cursor-key`, docs/api.md)."""
    trusted_proxies: list[str] = Field(default_factory=list, examples=[["10.0.0.0/8"]])
    """Proxies (JSON list of CIDRs) whose `X-Forwarded-For` names the client. Empty: proxy headers are ignored and
    the client is the TCP peer (docs/api.md, "Behind a proxy")."""

    @field_validator("trusted_proxies")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for i, cidr in enumerate(value):
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"item {i} is not an IP network in CIDR notation (e.g. 10.0.0.0/8)") from None
        return value


class UiSettings(_Section):
    """The web page at `/` and its sign-in (docs/ui.md)."""

    enabled: bool = True
    """Serve the question-and-answer page at `/` and its sign-in routes under `/ui/`."""
    session_max_age_s: int = Field(default=8 * 3600, ge=60, le=7 * 86_400)
    """Longest a page session lasts, in seconds, however it was signed in (an OIDC session also ends when its
    refresh token does)."""
    session_keys_file: str = "ui-session-keys"
    """Secret file of the keys that seal the page's cookies: one base64url 32-byte key per line, the first seals,
    every one opens (rotation: add a new first line, drop the old one after `session_max_age_s`). Missing: a key
    made at start (dev only, sessions end at restart and are not shared between replicas); prod refuses sign-in."""
    oidc_issuer: str | None = None
    """OpenID provider for the page's sign-in (its discovery document is `<issuer>/.well-known/openid-configuration`).
    Unset: sign-in with an API key only. Its access tokens are checked as API bearer tokens (`auth.jwt_*`)."""
    oidc_client_id: str | None = None
    """The page's client id at the OpenID provider."""
    oidc_redirect_uri: str | None = None
    """The redirect URI registered for the page: `https://<host>/ui/oidc/callback`."""
    oidc_client_secret_file: str = "ui-oidc-client-secret"  # noqa: S105 - the secret's file name, not a secret
    """Secret file holding the client secret; missing: a public client (PKCE alone)."""
    oidc_scopes: list[str] = Field(default_factory=lambda: ["openid", "profile", "offline_access"])
    """Scopes the page asks for (JSON list); a refresh token is needed to re-check groups."""
    oidc_recheck_s: int = Field(default=300, ge=10, le=300)
    """Seconds between two checks of an OIDC session's groups, through its refresh token (at most 5 minutes)."""
    oidc_timeout_s: float = Field(default=5.0, gt=0, le=60)
    """Timeout of one request to the OpenID provider, in seconds."""

    @model_validator(mode="after")
    def _oidc_complete(self) -> UiSettings:
        if self.oidc_issuer and not (self.oidc_client_id and self.oidc_redirect_uri):
            raise ValueError(
                "DOCQUERY_UI__OIDC_ISSUER is set without DOCQUERY_UI__OIDC_CLIENT_ID and"
                " DOCQUERY_UI__OIDC_REDIRECT_URI; set both (docs/ui.md), or unset the issuer"
            )
        return self


class IngestSettings(_Section):
    chunk_tokens: int = Field(default=200, ge=16, le=8192)
    """Tokens per chunk (the embedding model's tokenizer)."""
    chunk_overlap: int = Field(default=30, ge=0)
    """Tokens two neighbouring chunks share."""
    max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    """Largest file ingested, in bytes. A larger file is not read: it is reported as failed (`file too large`),
    so the run exits 1, and a version already indexed stays."""
    max_expanded_bytes: int = Field(default=200 * 1024 * 1024, ge=1)
    """Most bytes a compressed file (DOCX, PDF streams) may expand to: the zip-bomb bound."""
    quarantine_flagged: bool = True
    """Store chunks the injection scan flags as quarantined, which every search excludes (docs/ingestion.md)."""
    optimize: bool = True
    """Build the search index (HNSW, indexed payload segments) at the end of a run that wrote chunks."""
    upsert_batch: int = Field(default=256, ge=1)
    """Chunks per write to the index."""
    embed_batch: int = Field(default=1024, ge=1)
    """Chunks per embed call, across documents (docs/design.md)."""
    parse_process: Literal["auto", "all", "off"] = "auto"
    """Which files are parsed in a process of their own, so a parser that crashes or hangs fails that file only:
    `auto` = PDF, DOCX and HTML (third-party parsers), `all`, or `off` (no timeout then)."""
    parse_timeout_s: float = Field(default=300.0, gt=0)
    """A file still parsing (in its own process) after this many seconds fails."""
    progress_interval_s: float = Field(default=10.0, ge=0.0)
    """Seconds between plain progress lines when not on a terminal; 0 = every batch."""
    acl_root: Path | None = None
    """Folder above which no `.docquery-acl.yaml` is read (`--acl-root`); unset = each `PATH` given. Set it to
    the share's root when the share is ingested one subfolder at a time; a `PATH` outside it is exit 2."""


class UploadSettings(_Section):
    """Documents sent to the service: `POST /v1/documents` (docs/api.md, "Uploads")."""

    enabled: bool = True
    """Accept uploads and run their worker in `serve` (needs the `ingest` package and a key that may write the
    collection); off: `POST /v1/documents` answers 503."""

    max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    """Largest uploaded file, in bytes; a larger one gets 413 before the rest of it is read."""
    max_files: int = Field(default=20, ge=1, le=1000)
    """Files one request may carry; more get 422."""
    max_name_bytes: int = Field(default=255, ge=16, le=1024)
    """Longest file name, in UTF-8 bytes; longer gets 422."""
    queue: int = Field(default=64, ge=1)
    """Documents that may wait for the worker; an upload that would pass it gets 503 with `Retry-After`."""
    concurrency: int = Field(default=1, ge=1, le=16)
    """Documents the worker processes at once, each on its own thread."""
    threads: int = Field(default=1, ge=0, le=64)
    """Torch threads of the worker's model calls that run on its own thread (for `embedder.kind=local`: with one
    embedder worker, or a call of one chunk; calls shared by the embedder's workers run one thread on each); 0:
    torch's default (every core). Questions go first on the model either way; fewer threads leave cores to the
    rest of the service."""
    embed_batch: int = Field(default=32, ge=1, le=4096)
    """Chunks per embed call of the worker, shared by the embedder's workers: a question waits for at most one
    such call on the model (smaller: questions wait less during an upload, and the upload is slower)."""
    parse_ahead: bool = True
    """Keep one parse process started (about 210 MB) for the next batch, so it does not wait the seconds that
    process's imports take; each batch still gets a process of its own."""
    tenant_max_documents: int = Field(default=10_000, ge=1)
    """Documents a tenant may hold, uploaded or handed over by `docquery ingest --server`; past it: 429."""
    tenant_max_bytes: int = Field(default=10 * 1024**3, ge=1)
    """Bytes of files a tenant may hold, uploaded or handed over by `docquery ingest --server`; past it: 413."""
    rate_limit_per_minute: int = Field(default=30, ge=1)
    """Upload requests per minute per caller, refused ones included; more get 429 with `Retry-After`."""
    rate_limit_burst: int = Field(default=10, ge=1)
    """Upload requests a caller may send at once above the steady rate."""
    retention_s: int = Field(default=0, ge=0)
    """Seconds an uploaded document is kept after it was last uploaded; then it is deleted (checked at start and
    every hour at most). 0: kept until deleted. Documents from a corpus (the CLI's, its hand-over's) never expire."""


class EncryptionSettings(_Section):
    enabled: bool = False
    """Encrypt chunk text at rest (AES-256-GCM under Vault Transit data keys, docs/security.md)."""
    vault_url: str | None = None
    """Vault for Transit, when it is not `vault.url`."""
    transit_mount: str = "transit"
    """Mount path of the Transit engine."""
    transit_key: str = "docquery"
    """Transit key that wraps the data keys."""
    key_cache_s: float = Field(default=300.0, gt=0)
    """Seconds a data key is used (ingest) or an unwrapped key is kept in memory (query)."""


class VaultSettings(_Section):
    url: str | None = None
    """Vault (or OpenBao) URL. Set: secrets are read from its KV v2 store instead of the secrets dir."""
    ca_cert: str | None = None
    """CA bundle that signs Vault's TLS certificate."""
    auth_method: Literal["kubernetes", "jwt", "approle", "token"] = "kubernetes"
    """How to log in to Vault."""
    role: str | None = None
    """Vault role (for `approle`: the role id)."""
    auth_mount: str | None = None
    """Mount path of the auth method, when not its default."""
    jwt_path: str = "/var/run/secrets/vault/token"
    """Service-account token file, for the `kubernetes` and `jwt` methods (re-read at each login)."""
    kv_mount: str = "secret"
    """Mount path of the KV v2 engine."""
    kv_path: str | None = None
    """Path of this workload's secrets in KV (e.g. `docquery/query`); required with `url`."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="ignore",
        validate_default=True,
        use_attribute_docstrings=True,
    )

    profile: Profile = Profile.DEV
    """`dev` or `prod`. `prod` refuses secrets in env vars, unknown `DOCQUERY_*` variables, missing or
    placeholder required secrets, and running without authentication."""
    data_dir: Path = Path("./.docquery")
    """Where the embedded Qdrant engine and the ingest state keep their files."""
    secrets_dir: Path = Path(DEFAULT_SECRETS_DIR)
    """Directory of secret files, as the Vault Agent renders them (an in-memory volume). Without `vault.url`, the
    prod profile refuses to start when it is missing, not a directory, or not readable and searchable."""
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    """Port of the Prometheus metrics listener of `serve`, apart from the API; 0 = off."""
    log_level: str = "INFO"
    """Log level (`DEBUG`, `INFO`, `WARNING`, `ERROR`)."""
    log_format: Literal["auto", "json", "text"] = "auto"
    """Log format: `json` (one object per line), `text`, or `auto`: JSON for `serve`, in the prod profile and
    when stderr is not a terminal; text on a terminal."""

    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    ui: UiSettings = Field(default_factory=UiSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    uploads: UploadSettings = Field(default_factory=UploadSettings)
    encryption: EncryptionSettings = Field(default_factory=EncryptionSettings)
    vault: VaultSettings = Field(default_factory=VaultSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # No dotenv and no secrets dir: the model holds no secret (docquery.secrets reads them).
        return (init_settings, env_settings)

    def __init__(self, **values: Any) -> None:
        # pydantic's ValidationError text embeds the offending input, which may be a
        # secret: translate it into locations and reasons only.
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(describe_validation_error(exc, os.environ)) from None
        except _SourceError as exc:
            raise SettingsError(describe_source_error(exc, os.environ, setting_fields())) from None
        check_unknown_env_vars(self.profile, os.environ)

    @property
    def is_prod(self) -> bool:
        return self.profile == Profile.PROD


def setting_fields(cls: type[BaseModel] = Settings) -> Iterator[tuple[str, str, FieldInfo]]:
    """Every leaf setting as (dotted path, env var, field), in model order."""
    for name, field in cls.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for sub, sub_field in annotation.model_fields.items():
                env = f"{ENV_PREFIX}{name}{NESTED_DELIMITER}{sub}".upper()
                yield f"{name}.{sub}", env, sub_field
        else:
            yield name, f"{ENV_PREFIX}{name}".upper(), field


def known_env_vars() -> set[str]:
    """Every variable the settings model reads (sections too: pydantic-settings takes them as JSON)."""
    names = {env for _, env, _ in setting_fields()}
    names |= {f"{ENV_PREFIX}{name}".upper() for name in Settings.model_fields}
    return names


def check_unknown_env_vars(profile: Profile, environ: Mapping[str, str]) -> None:
    """Warn (dev) or refuse (prod) every ``DOCQUERY_*`` variable, or key of a section's JSON, that names no setting.

    Variables and keys that carry a secret are the secret source's to judge (docquery.secrets).
    """
    unknown = unknown_env_vars(known_env_vars(), environ)
    if profile == Profile.PROD and unknown:
        raise SettingsError(unknown[0].message(refused=True))
    for u in unknown:
        log.warning("%s", u.message())


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment and ``overrides`` (secrets are docquery.secrets' to read)."""
    return Settings(**overrides)
