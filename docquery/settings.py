"""DocQuery settings: one nested pydantic-settings model.

Precedence (highest first): keyword arguments (tests, the CLI's flags), then environment
variables ``DOCQUERY_*`` with ``__`` nesting, then field defaults.

The model holds no secret. Credentials (``llm-api-key``, ``qdrant-api-key``, ...) are read
through :mod:`docquery.secrets` on every use, from files, Vault or (dev only) env vars, so
a rotated key takes effect without a restart and there is one way to read a secret.

A ``DOCQUERY_*`` variable that names no setting is a warning naming the closest real
setting, and an error in the prod profile: a misspelt setting must not be silently ignored.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import SettingsError as _SourceError

from docquery.envvars import ENV_PREFIX, NESTED_DELIMITER, carries_secret, unknown_env_vars

log = logging.getLogger(__name__)

DEFAULT_SECRETS_DIR = "/vault/secrets"


class Profile(StrEnum):
    DEV = "dev"
    PROD = "prod"


class SettingsError(ValueError):
    """A configuration problem; the message names the setting, never its value."""


class QdrantSettings(BaseModel):
    url: str | None = None
    collection: str = "docquery"
    timeout_s: float = 10.0
    # Server-side distribution, used when the server adapter creates a collection.
    shard_number: int = Field(default=1, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    write_consistency_factor: int = Field(default=1, ge=1)


EmbedderPrecision = Literal["auto", "float32", "bfloat16"]


class EmbedderSettings(BaseModel):
    kind: Literal["local", "openai"] = "local"
    # For kind=openai: an OpenAI-compatible /v1 base URL (vLLM --task embed, TEI, ...).
    base_url: str | None = None
    model: str = "all-MiniLM-L6-v2"
    dimension: int | None = None  # for kind=openai when the server cannot be probed
    # 32 measured 6-8 % faster than 64 for the bundled model on CPU, in both precisions.
    batch_size: int = Field(default=32, ge=1, le=4096)
    timeout_s: float = 30.0
    # kind=local: "auto" runs the matrix products in bfloat16 when the CPU has native bfloat16
    # (AMX or AVX512-BF16) and in float32 otherwise. Vectors match float32 to cosine >= 0.9999
    # (docs/benchmarks.md), so a collection never needs re-embedding when this changes.
    precision: EmbedderPrecision = "auto"
    # kind=local on CPU: threads that share a long embed call, one torch thread each; 0 = one per
    # usable core, at most 4 (docquery/adapters/local_embedder.py).
    workers: int = Field(default=0, ge=0, le=64)
    # Bulk commands (ingest, eval) set glibc malloc to keep freed memory in the process, so torch's
    # per-pass buffers are not faulted in afresh every pass (docquery/malloc.py). The server does not.
    tune_malloc: bool = True


class LLMSettings(BaseModel):
    base_url: str | None = None
    model: str = "docquery-llm"
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 60.0
    total_timeout_s: float = 120.0
    max_concurrency: int = Field(default=16, ge=1)
    max_retries: int = Field(default=2, ge=0, le=5)
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.1, ge=0.0, le=2.0)


class RetrievalSettings(BaseModel):
    mode: Literal["dense", "sparse", "hybrid"] = "hybrid"
    top_k: int = Field(default=5, ge=1, le=50)
    max_top_k: int = Field(default=50, ge=1, le=200)
    # DBSF normalises each branch over its fetched list: 100 candidates are level with
    # 200 on the SciFact train split, 50 lose 0.007 nDCG@10 (docs/benchmarks.md).
    prefetch_limit: int = Field(default=100, ge=1, le=1000)
    # Hybrid fusion: "dbsf" was best on the train split and runs inside Qdrant.
    fusion: Literal["dbsf", "rrf", "convex"] = "dbsf"
    # Weights for (dense, sparse), used by rrf and convex.
    rrf_k: int = Field(default=60, ge=1)
    dense_weight: float = Field(default=1.0, ge=0.0)
    sparse_weight: float = Field(default=1.0, ge=0.0)
    # Dense cosine below this means "not in the documents" (refusal, no citations).
    min_dense_score: float = Field(default=0.30, ge=-1.0, le=1.0)


class AuthSettings(BaseModel):
    api_keys_file: str = "api-keys.json"
    jwks_file: str = "jwks.json"
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_groups_claim: str = "groups"
    jwt_roles_claim: str = "roles"
    jwt_algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"])
    jwt_leeway_s: int = Field(default=30, ge=0, le=300)


class ApiSettings(BaseModel):
    max_body_bytes: int = Field(default=64 * 1024, ge=1024)
    max_question_chars: int = Field(default=2000, ge=1)
    rate_limit_per_minute: int = Field(default=60, ge=1)
    rate_limit_burst: int = Field(default=20, ge=1)
    # Hosts that answer links may point to. Empty: every link is neutralised.
    link_allowlist: list[str] = Field(default_factory=list)


class IngestSettings(BaseModel):
    chunk_tokens: int = Field(default=200, ge=16, le=8192)
    chunk_overlap: int = Field(default=30, ge=0)
    max_file_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    max_expanded_bytes: int = Field(default=200 * 1024 * 1024, ge=1)
    quarantine_flagged: bool = True
    # Build the search index (HNSW, indexed payload segments) at the end of a run that wrote chunks.
    optimize: bool = True
    upsert_batch: int = Field(default=256, ge=1)
    # Chunks per embed call, across documents. The local embedder sorts a call by length before
    # its passes of 32: calls of 1024 pad 1.8 % of tokens, calls of 256 5.9 % (SciFact).
    embed_batch: int = Field(default=1024, ge=1)
    # Which files are parsed in a process of their own, so that a parser that crashes or hangs on
    # one (untrusted) file fails that file only: "auto" = PDF, DOCX and HTML, whose parsers are
    # third-party code; "all"; "off" (no timeout then). See ingest.parsing.
    parse_process: Literal["auto", "all", "off"] = "auto"
    parse_timeout_s: float = Field(default=300.0, gt=0)  # a file still parsing after this fails (parse process)
    progress_interval_s: float = Field(default=10.0, ge=0.0)  # plain progress lines (non-TTY); 0 = every batch


class EncryptionSettings(BaseModel):
    enabled: bool = False
    vault_url: str | None = None
    transit_mount: str = "transit"
    transit_key: str = "docquery"
    key_cache_s: float = Field(default=300.0, gt=0)


class VaultSettings(BaseModel):
    url: str | None = None
    ca_cert: str | None = None
    auth_method: Literal["kubernetes", "jwt", "approle", "token"] = "kubernetes"
    role: str | None = None
    auth_mount: str | None = None
    jwt_path: str = "/var/run/secrets/vault/token"
    kv_mount: str = "secret"
    kv_path: str | None = None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="ignore",
        validate_default=True,
    )

    profile: Profile = Profile.DEV
    data_dir: Path = Path("./.docquery")
    secrets_dir: Path = Path(DEFAULT_SECRETS_DIR)
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    log_level: str = "INFO"

    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
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
            raise SettingsError(_describe(exc)) from None
        except _SourceError as exc:
            raise SettingsError(_describe_source_error(exc)) from None
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
    """Warn (dev) or refuse (prod) every ``DOCQUERY_*`` variable that names no setting.

    Variables that carry a secret are the secret source's to judge (docquery.secrets).
    """
    unknown = [
        u for u in unknown_env_vars(known_env_vars(), environ) if not carries_secret(u.name, environ.get(u.name, ""))
    ]
    if profile == Profile.PROD and unknown:
        raise SettingsError(unknown[0].message().replace("is ignored", "is refused in the prod profile"))
    for u in unknown:
        log.warning("%s", u.message())


def _describe_source_error(exc: _SourceError) -> str:
    """pydantic-settings could not parse a section's JSON: name the variable, not the value."""
    match = re.search(r'field "([a-z_]+)"', str(exc))
    var = f"{ENV_PREFIX}{match.group(1)}".upper() if match else f"a {ENV_PREFIX}* variable"
    return f"{var} is not valid JSON; set its fields one by one ({var}__<FIELD>) or fix the JSON"


def _describe(exc: ValidationError) -> str:
    problems = [f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()]
    return "invalid settings: " + "; ".join(problems)


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment, secret files and ``overrides``."""
    return Settings(**overrides)
