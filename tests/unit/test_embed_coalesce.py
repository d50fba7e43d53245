"""Query embeds that arrive while the model is busy share its next pass; each caller gets its own vectors.

The model is a function that records its passes; a pass is held open by an event, so which calls
arrive "while it is busy" is decided by the test, not by timing.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from docquery.core.errors import EmbedderError
from docquery.embedders.coalesce import Coalescer, Vectors


class Model:
    """Records each pass; the first pass waits for ``release`` (so later calls queue behind it)."""

    def __init__(self, *, fail_on: str | None = None) -> None:
        self.passes: list[list[str]] = []
        self.busy = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, texts: list[str]) -> Vectors:
        self.passes.append(list(texts))
        if len(self.passes) == 1:
            self.busy.set()
            self.release.wait(timeout=30)
        if self.fail_on in texts:
            raise EmbedderError("encode")
        return [[float(len(t)), float(sum(map(ord, t)))] for t in texts]


def vector(text: str) -> list[float]:
    return [float(len(text)), float(sum(map(ord, text)))]


async def busy(model: Model) -> None:
    """Until the first pass is running on its thread."""
    await asyncio.to_thread(model.busy.wait, 30)


@pytest.mark.parametrize(
    ("max_texts", "expected"), [(32, [["q2", "q3", "q4", "q5"]]), (2, [["q2", "q3"], ["q4", "q5"]])]
)
def test_calls_that_queue_behind_a_pass_share_the_next_ones(max_texts: int, expected: list[list[str]]) -> None:
    model = Model()
    embed = Coalescer(model, max_texts)

    async def main() -> list[Vectors]:
        first = asyncio.ensure_future(embed(["q1"]))
        await busy(model)
        later = [asyncio.ensure_future(embed([f"q{i}"])) for i in range(2, 6)]
        await asyncio.sleep(0)  # every later call is queued before the pass ends
        model.release.set()
        return await asyncio.gather(first, *later)

    results = asyncio.run(main())
    assert model.passes == [["q1"], *expected]  # the lone first call did not wait for company
    assert results == [[vector(f"q{i}")] for i in range(1, 6)]


@pytest.mark.parametrize("sizes", [(3, 2), (1, 4, 1), (2, 2, 2, 2), (5,), (1, 1, 3)])
def test_a_calls_texts_stay_in_one_pass_and_in_order(sizes: tuple[int, ...]) -> None:
    model = Model()
    embed = Coalescer(model, 4)
    calls = [[f"c{n}t{i}" for i in range(size)] for n, size in enumerate(sizes)]

    async def main() -> list[Vectors]:
        first = asyncio.ensure_future(embed(["warm"]))
        await busy(model)
        later = [asyncio.ensure_future(embed(texts)) for texts in calls]
        await asyncio.sleep(0)
        model.release.set()
        await first
        return await asyncio.gather(*later)

    results = asyncio.run(main())
    assert results == [[vector(t) for t in texts] for texts in calls]
    for pass_ in model.passes[1:]:
        owners = {t.split("t")[0] for t in pass_}
        # A call larger than a pass goes alone; otherwise a pass holds whole calls within the bound.
        assert len(pass_) <= 4 or len(owners) == 1
        for owner in owners:
            assert [t for t in pass_ if t.startswith(owner + "t")] == calls[int(owner[1:])]


def test_a_failed_pass_fails_its_callers_only_and_the_next_pass_runs() -> None:
    model = Model(fail_on="bad")
    embed = Coalescer(model, 2)

    async def main() -> list[Vectors | BaseException]:
        first = asyncio.ensure_future(embed(["q1"]))
        await busy(model)
        later = [asyncio.ensure_future(embed([t])) for t in ("ok", "bad", "after")]
        await asyncio.sleep(0)
        model.release.set()
        return await asyncio.gather(first, *later, return_exceptions=True)

    first, ok, bad, after = asyncio.run(main())
    assert model.passes == [["q1"], ["ok", "bad"], ["after"]]
    assert first == [vector("q1")]
    assert isinstance(ok, EmbedderError)
    assert isinstance(bad, EmbedderError)
    assert after == [vector("after")]


def test_a_caller_that_gave_up_is_left_out_of_the_pass() -> None:
    model = Model()
    embed = Coalescer(model, 32)

    async def main() -> Vectors:
        first = asyncio.ensure_future(embed(["q1"]))
        await busy(model)
        gone = asyncio.ensure_future(embed(["gone"]))
        kept = asyncio.ensure_future(embed(["kept"]))
        await asyncio.sleep(0)
        gone.cancel()
        model.release.set()
        await first
        return await kept

    assert asyncio.run(main()) == [vector("kept")]
    assert model.passes == [["q1"], ["kept"]]


def test_each_event_loop_gets_its_own_queue() -> None:
    model = Model()
    model.release.set()
    embed = Coalescer(model, 32)
    for text in ("one", "two"):  # as `docquery ask` does: asyncio.run per call
        assert asyncio.run(embed([text])) == [vector(text)]
    assert model.passes == [["one"], ["two"]]


def test_closing_the_loop_mid_pass_leaves_no_caller_waiting() -> None:
    model = Model()
    embed = Coalescer(model, 32)
    waiting: list[asyncio.Future[Vectors]] = []

    async def main() -> None:
        waiting.append(asyncio.ensure_future(embed(["q1"])))
        await busy(model)
        waiting.append(asyncio.ensure_future(embed(["q2"])))
        await asyncio.sleep(0)
        # Let the pass's thread end once its caller is answered, or asyncio.run would wait on it.
        waiting[1].add_done_callback(lambda _: model.release.set())
        # asyncio.run cancels every task left when main returns, the drain among them.

    asyncio.run(main())
    assert all(future.cancelled() for future in waiting)  # the running pass's caller and the queued one
    assert model.passes == [["q1"]]
    assert asyncio.run(embed(["again"])) == [vector("again")]
