"""DocQuery settings: one nested pydantic-settings model.

Precedence (highest first), as ordered in ``settings_customise_sources``:

1. keyword arguments (tests, the CLI's flags);
2. environment variables ``DOCQUERY_*`` with ``__`` nesting;
3. secret files in ``DOCQUERY_SECRETS_DIR`` (as Vault Agent renders them);
4. field defaults.

Secrets are ``SecretStr`` so ``repr(settings)`` never shows them. In the ``prod``
profile a secret set through an environment variable is refused, with an error
that names the variable: env vars leak through ``/proc``, crash dumps and
``kubectl describe``, files on an in-memory volume do not.
"""

from __future__ import annotations

import logging
import os
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

log = logging.getLogger(__name__)

ENV_PREFIX = "DOCQUERY_"
DEFAULT_SECRETS_DIR = "/vault/secrets"

# Secret file name (CONTRACT.md) -> nested settings field path.
SECRET_FILES: dict[str, tuple[str, str]] = {
    "llm-api-key": ("llm", "api_key"),
    "qdrant-api-key": ("qdrant", "api_key"),
    "embedder-api-key": ("embedder", "api_key"),
}

# Values that mean "somebody forgot to set this"; refused in prod.
_PLACEHOLDERS = {"", "changeme", "change-me", "placeholder", "secret", "xxx", "todo", "dummy"}


def contract_secret_env_var(filename: str) -> str:
    """The env var that would carry a contract secret file (``llm-api-key`` -> ``DOCQUERY_LLM__API_KEY``)."""
    section, key = SECRET_FILES[filename]
    return f"{ENV_PREFIX}{section}__{key}".upper()


class Profile(StrEnum):
    DEV = "dev"
    PROD = "prod"


class SettingsError(ValueError):
    """A configuration problem; the message names the setting, never its value."""


class QdrantSettings(BaseModel):
    url: str | None = None
    api_key: SecretStr | None = None
    collection: str = "docquery"
    timeout_s: float = 10.0
    # Server-side distribution, used when the server adapter creates a collection.
    shard_number: int = Field(default=1, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    write_consistency_factor: int = Field(default=1, ge=1)
    # Search structures of a collection this build creates (docs/benchmarks.md, "Scale"); an existing
    # collection keeps those it was created with. oversampling and hnsw_ef apply to every search.
    hnsw_m: int = Field(default=16, ge=4, le=128)
    hnsw_ef_construct: int = Field(default=100, ge=4, le=1000)
    hnsw_ef: int | None = Field(default=None, ge=1, le=4096)
    full_scan_threshold_kb: int = Field(default=100_000, ge=0)
    quantization: Literal["int8", "none"] = "int8"
    oversampling: float = Field(default=2.0, ge=1.0, le=16.0)
    indexing_threshold_kb: int = Field(default=10_000, ge=0)
    max_segment_size_kb: int = Field(default=200_000, ge=1_000)


EmbedderPrecision = Literal["auto", "float32", "bfloat16"]


class EmbedderSettings(BaseModel):
    kind: Literal["local", "openai"] = "local"
    # For kind=openai: an OpenAI-compatible /v1 base URL (vLLM --task embed, TEI, ...).
    base_url: str | None = None
    model: str = "all-MiniLM-L6-v2"
    dimension: int | None = None  # for kind=openai when the server cannot be probed
    api_key: SecretStr | None = None
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
    api_key: SecretStr | None = None
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


class _ProfileAwareSecretsSource(PydanticBaseSettingsSource):
    """Reads the contract's secret files (``llm-api-key``...) into nested fields."""

    def __init__(self, settings_cls: type[BaseSettings], secrets_dir: Path) -> None:
        super().__init__(settings_cls)
        self._dir = secrets_dir

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ builds the whole dict

    def __call__(self) -> dict[str, Any]:
        out: dict[str, dict[str, Any]] = {}
        if not self._dir.is_dir():
            return {}
        for filename, (section, key) in SECRET_FILES.items():
            path = self._dir / filename
            if path.is_file():
                value = path.read_text(encoding="utf-8").strip()
                if value:
                    out.setdefault(section, {})[key] = value
        return out


class _EnvSecretGuard(PydanticBaseSettingsSource):
    """Refuses env-var secrets in prod; warns in dev. Contributes no values."""

    def __init__(self, settings_cls: type[BaseSettings], profile: str) -> None:
        super().__init__(settings_cls)
        self._profile = profile

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        for filename in SECRET_FILES:
            var = contract_secret_env_var(filename)
            present = [name for name in os.environ if name.upper() == var]
            if not present:
                continue
            if self._profile == Profile.PROD:
                raise SettingsError(
                    f"{present[0]} is set, but the prod profile refuses secrets from environment "
                    f"variables; put it in the secrets dir as a file instead"
                )
            log.warning("secret taken from environment variable %s (dev profile only)", present[0])
        return {}


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
        init = init_settings()
        env = EnvSettingsSource(settings_cls)
        profile = str(init.get("profile") or os.environ.get(f"{ENV_PREFIX}PROFILE", Profile.DEV))
        secrets_dir = Path(
            str(init.get("secrets_dir") or os.environ.get(f"{ENV_PREFIX}SECRETS_DIR", DEFAULT_SECRETS_DIR))
        )
        return (
            init_settings,
            _EnvSecretGuard(settings_cls, profile.lower()),
            env,
            _ProfileAwareSecretsSource(settings_cls, secrets_dir),
        )

    def __init__(self, **values: Any) -> None:
        # pydantic's ValidationError text embeds the offending input, which may be a
        # secret: translate it into locations and reasons only.
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(_describe(exc)) from None
        self._prod_requires_real_secrets()

    def _prod_requires_real_secrets(self) -> None:
        if self.profile != Profile.PROD:
            return
        required: list[tuple[str, SecretStr | None]] = []
        if self.llm.base_url:
            required.append(("llm-api-key", self.llm.api_key))
        if self.qdrant.url:
            required.append(("qdrant-api-key", self.qdrant.api_key))
        if self.embedder.kind == "openai":
            required.append(("embedder-api-key", self.embedder.api_key))
        for filename, secret in required:
            if secret is None or secret.get_secret_value().strip().lower() in _PLACEHOLDERS:
                raise SettingsError(
                    f"the prod profile needs the secret file {filename!r} in the secrets dir "
                    f"(missing, empty or a placeholder)"
                )

    @property
    def is_prod(self) -> bool:
        return self.profile == Profile.PROD


def _describe(exc: ValidationError) -> str:
    problems = [f"{'.'.join(str(p) for p in err['loc']) or 'settings'}: {err['msg']}" for err in exc.errors()]
    return "invalid settings: " + "; ".join(problems)


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment, secret files and ``overrides``."""
    return Settings(**overrides)
