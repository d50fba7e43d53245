"""Remote embedder for an OpenAI-compatible ``/v1/embeddings`` (vLLM, TEI, ...).

Used for GPU-speed ingest. The API key is read through a callable on every call,
so a rotated Vault-rendered file takes effect without a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import httpx
from pydantic import SecretStr

from docquery.errors import EmbedderError

KeyProvider = Callable[[], SecretStr | None]


class OpenAIEmbedder:
    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: KeyProvider,
        dimension: int | None = None,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._model = model
        self._key = api_key
        self._batch = batch_size
        self._client = httpx.Client(base_url=base_url.rstrip("/") + "/", timeout=timeout_s, transport=transport)
        self._dimension = dimension if dimension is not None else len(self._call(["dimension probe"])[0])

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch):
            out.extend(self._call(list(texts[i : i + self._batch])))
        return out

    def _call(self, batch: list[str]) -> list[list[float]]:
        headers = {}
        key = self._key()
        if key is not None:
            headers["Authorization"] = f"Bearer {key.get_secret_value()}"
        try:
            resp = self._client.post("embeddings", json={"model": self._model, "input": batch}, headers=headers)
        except httpx.HTTPError:
            raise EmbedderError("embeddings request") from None
        if resp.status_code != 200:
            raise EmbedderError("embeddings request", resp.status_code)
        try:
            data = sorted(resp.json()["data"], key=lambda d: d["index"])
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError):
            raise EmbedderError("embeddings response") from None
        if len(vectors) != len(batch):
            raise EmbedderError("embeddings response")
        return vectors

    def close(self) -> None:
        self._client.close()
