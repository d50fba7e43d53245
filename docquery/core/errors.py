"""The project's own error types. Adapters translate library errors into these.

    DocQueryError
     ├── ConfigError            bad or missing configuration (exit 2 / refuse to start)
     │    ├── SettingsError       (docquery.config.settings) a setting's value or name is wrong
     │    ├── ApiKeyFileError     (docquery.api.auth.apikeys) the API keys file is malformed
     │    └── SealError           (docquery.ui.seal) no key can seal the page's cookies
     ├── UsageProblem           a flag's or a request's value is out of range (exit 2, HTTP 422)
     │    ├── InvalidRequest      (docquery.validation) a question, top_k, group or collection out of bounds
     │    ├── MultipartError      (docquery.api.uploads.multipart) an upload's body or one of its parts is malformed
     │    └── UsageError          (ingest.model) a problem found before ingest writes anything
     ├── BusyError              another process holds the embedded index or a port (exit 3)
     ├── EmptyIndexError        ``ask``'s collection does not exist or holds nothing (exit 4)
     ├── ServiceUnavailable     the ``docquery serve`` that ``ask`` asks did not answer, or said 429/5xx (exit 75)
     ├── VectorIndexError       a Qdrant operation failed (operation name, never payload text)
     │    ├── VectorIndexUnreachable  no response from the Qdrant server (down, wrong URL, timeout)
     │    ├── CollectionMissingError  the collection does not exist and this open may not create it
     │    ├── SchemaVersionError  (docquery.core.collection) written with another payload layout
     │    └── ModelMismatchError  (docquery.core.collection) collection built with another model
     ├── EmbedderError          the embedder failed or returned the wrong shape
     │    └── EmbedderUnreachable  the embedding server did not answer, or answered 429/5xx
     ├── GeneratorError         the LLM call failed (operation, HTTP status)
     │    ├── GeneratorUnavailable  down, refused, timed out
     │    └── GeneratorOverloaded   too many calls in flight, or upstream 429/503
     ├── SecretsError           (docquery.secrets.base) a secret is missing, malformed or refused
     │    ├── SecretUnavailableError  the source cannot be read
     │    │    ├── SecretsDirError      the secrets dir cannot serve files
     │    │    └── VaultError           (docquery.secrets.vault) login, renewal or read failed
     │    ├── SecretFormatError   the content is malformed
     │    ├── EnvSecretRefusedError  prod refuses a secret from the environment
     │    └── MissingSecretError  prod needs a secret that is missing or a placeholder
     ├── CryptoError            (docquery.secrets.crypto) envelope encryption
     │    ├── DecryptionError     a token does not decrypt (tampered, moved, wrong key)
     │    └── KeyUnavailableError Transit unreachable or denied
     ├── ApiError               (docquery.api.errors) an HTTP error answered as is (status, fixed message)
     ├── OidcError              (docquery.ui.oidc) the OpenID provider could not be used (fixed text)
     ├── _SignInFailed          (docquery.api.routes.ui_session) a sign-in ends on the page's error page
     ├── _NoKeyError            (docquery.index.server) no Qdrant key now: no request is sent
     ├── DatasetError           (docquery.evaluation.beir) an evaluation dataset is missing or malformed
     ├── FileRejected           (ingest.model) one file cannot be ingested (its reason is safe to show)
     └── ParseProcessError      (ingest.prepare.parsing) the parse process failed to start or broke protocol

Every exception class of docquery and ingest is in this tree (tests/unit/test_error_tree.py).

Messages carry operations, statuses and counts. They never carry document text,
question text, prompts, completions or secrets: ``str(exc)`` of an upstream
response can contain any of those, so it is never embedded.
"""

from __future__ import annotations


class DocQueryError(Exception):
    """Base of every error DocQuery raises on purpose."""


class ConfigError(DocQueryError):
    pass


class UsageProblem(DocQueryError):
    """A flag's or a request's value is out of range (exit 2, HTTP 422)."""


class BusyError(DocQueryError):
    """Another process holds a resource this command needs (the embedded index, a port): exit 3."""


class ServiceUnavailable(DocQueryError):
    """The ``docquery serve`` that ``ask`` asks did not answer, or answered 429/5xx: exit 75."""


class EmptyIndexError(DocQueryError):
    """``ask`` against a collection that does not exist or holds no chunks: exit 4."""


class VectorIndexError(DocQueryError):
    def __init__(self, operation: str, detail: str = "") -> None:
        super().__init__(f"vector index operation {operation!r} failed" + (f": {detail}" if detail else ""))
        self.operation = operation


class VectorIndexUnreachable(VectorIndexError):
    pass


class CollectionMissingError(VectorIndexError):
    """The collection does not exist, and this open may not create it (the query side: its key may only read)."""


class EmbedderError(DocQueryError):
    def __init__(self, operation: str, status: int | None = None, detail: str = "") -> None:
        suffix = f" (status {status})" if status is not None else ""
        super().__init__(f"embedder operation {operation!r} failed{suffix}" + (f": {detail}" if detail else ""))
        self.operation = operation
        self.status = status


class EmbedderUnreachable(EmbedderError):
    """The embedding server did not answer, or answered that it cannot now (429, 5xx): worth a retry."""


class GeneratorError(DocQueryError):
    def __init__(self, operation: str, status: int | None = None, *, retry_after: float | None = None) -> None:
        suffix = f" (status {status})" if status is not None else ""
        super().__init__(f"generator operation {operation!r} failed{suffix}")
        self.operation = operation
        self.status = status
        self.retry_after = retry_after


class GeneratorUnavailable(GeneratorError):
    pass


class GeneratorOverloaded(GeneratorError):
    pass
