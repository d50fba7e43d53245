"""benchmarks/api_cpu.py and api_cpu_profile.py: the CPU read by thread, and which group a profile sample goes to."""

from __future__ import annotations

import os

import pytest

from benchmarks.api_cpu import thread_cpu
from benchmarks.api_cpu_profile import OTHER, group_of

LOOP = ["run_forever\x00/py/asyncio/base_events.py\x00600", "_run_once\x00/py/asyncio/base_events.py\x001900"]
MIDDLEWARE = [  # every request runs inside these, so their files must not decide a group
    "__call__\x00/app/docquery/api/middleware.py\x0039",
    "__call__\x00/app/docquery/api/limits.py\x0035",
    "__call__\x00/site/starlette/routing.py\x00700",
]


def test_the_main_thread_is_named_and_its_cpu_counted() -> None:
    # Other tests' threads may end meanwhile and take their CPU out of the sums, so only the main thread is compared.
    before = thread_cpu(os.getpid())
    while thread_cpu(os.getpid())["main"] - before["main"] < 0.05:
        sum(range(1000))
    after = thread_cpu(os.getpid())
    assert after["main"] >= before["main"] + 0.05
    assert all(v >= 0 for v in after.values())


@pytest.mark.parametrize(
    ("inner", "group"),
    [
        (["__call__\x00/app/docquery/api/answer_html.py\x0038"], "answer_html (markdown-it, nh3)"),
        (
            ["citations\x00/app/docquery/rag/pipeline.py\x00162", "label\x00/app/docquery/rag/sanitize.py\x0099"],
            "citations (snippets, clean fields)",
        ),
        (["__call__\x00/app/docquery/rag/sanitize.py\x0080"], "answer sanitiser"),
        (["search\x00/app/docquery/index/search.py\x0033"], "search (BM25 query vector, Edge query, hits)"),
        (["complete_finish\x00/app/docquery/generators/openai_chat.py\x00102"], "LLM call (aiohttp client)"),
        (["record\x00/app/docquery/api/audit.py\x0048"], "audit chain and log lines"),
        (["verified_caller\x00/app/docquery/api/deps.py\x00102"], "auth, limits, tenant share"),
        (["take\x00/app/docquery/api/limits.py\x00121"], "auth, limits, tenant share"),
        (["send\x00/site/uvicorn/protocols/http/h11_impl.py\x00455"], OTHER),
    ],
)
def test_a_request_sample_goes_to_its_innermost_named_group(inner: list[str], group: str) -> None:
    assert group_of([*LOOP, *MIDDLEWARE, *inner]) == group


def test_idle_loop_and_startup_samples_are_not_request_work() -> None:
    assert group_of([*LOOP, "select\x00/py/selectors.py\x00450"]) is None
    assert (
        group_of(["<module>\x00/app/docquery/cli.py\x001", "__init__\x00/app/docquery/embedders/local.py\x0090"])
        is None
    )
