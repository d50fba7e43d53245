"""The model's lock lets a waiting question in before any waiting bulk call (ingest, uploads), so a question waits
for at most the bulk call that holds the model. Ordered by events, never by time."""

from __future__ import annotations

import threading
import time

from docquery.embedders.local import QuestionsFirst


def _until(condition: object, what: str) -> None:
    # Waits on another thread's progress (a bounded spin on state, not a timing assertion).
    deadline = time.monotonic() + 30
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def test_a_waiting_question_goes_before_a_waiting_bulk_call() -> None:
    gate = QuestionsFirst()
    order: list[str] = []
    release = threading.Event()

    def first_bulk() -> None:
        with gate.hold(question=False):
            order.append("bulk-1")
            release.wait()

    def call(name: str, question: bool) -> None:
        with gate.hold(question=question):
            order.append(name)

    holder = threading.Thread(target=first_bulk)
    holder.start()
    _until(lambda: order == ["bulk-1"], "the first bulk call holds the model")
    second = threading.Thread(target=call, args=("bulk-2", False))
    second.start()
    _until(lambda: gate.bulk == 1, "the second bulk call waits")
    question = threading.Thread(target=call, args=("question", True))
    question.start()
    _until(lambda: gate.questions == 1, "the question waits")
    release.set()
    for t in (holder, second, question):
        t.join()
    assert order == ["bulk-1", "question", "bulk-2"]


def test_questions_alone_and_bulk_alone_each_take_turns() -> None:
    gate = QuestionsFirst()
    inside = 0
    most = 0
    lock = threading.Lock()

    def call(question: bool) -> None:
        nonlocal inside, most
        for _ in range(50):
            with gate.hold(question=question):
                with lock:
                    inside += 1
                    most = max(most, inside)
                with lock:
                    inside -= 1

    threads = [threading.Thread(target=call, args=(i % 2 == 0,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1 and gate.questions == gate.bulk == 0  # one at a time, nothing left waiting


def test_a_stream_of_questions_does_not_starve_a_bulk_call() -> None:
    """Questions that keep coming: after BULK_AFTER of them went first, the waiting bulk call has its turn."""
    gate = QuestionsFirst()
    order: list[str] = []
    release = threading.Event()

    def hold_first() -> None:
        with gate.hold(question=True):
            order.append("q0")
            release.wait()

    def call(name: str, question: bool) -> None:
        with gate.hold(question=question):
            order.append(name)

    holder = threading.Thread(target=hold_first)
    holder.start()
    _until(lambda: order == ["q0"], "a question holds the model")
    bulk = threading.Thread(target=call, args=("bulk", False))
    bulk.start()
    _until(lambda: gate.bulk == 1, "the bulk call waits")
    waiting = [threading.Thread(target=call, args=(f"q{i}", True)) for i in range(1, 2 * QuestionsFirst.BULK_AFTER)]
    for t in waiting:
        t.start()
    _until(lambda: gate.questions == len(waiting), "the questions wait")
    release.set()
    for t in [holder, bulk, *waiting]:
        t.join()
    assert order.index("bulk") == 1 + QuestionsFirst.BULK_AFTER  # q0, then BULK_AFTER questions, then the bulk call
