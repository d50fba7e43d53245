"""Where the profiled service's event loop spends its time: a pyinstrument session, grouped by the code that ran.

pyinstrument samples the main thread (the event loop, where every request's Python work runs) by wall
clock, so a sample also holds any wait for the GIL there; the threads' own CPU is in api_cpu's
``cpu_ms_per_answer_by_thread``. Each sample goes to the first group below that a frame of its stack
belongs to; time in the loop's ``select`` is idle, and samples outside the running loop (imports,
the model's load, shutdown) are left out.

    .venv/bin/python -m benchmarks.api_cpu_profile /tmp/api-cpu.pyisession
"""

from __future__ import annotations

import argparse
from pathlib import Path

# (group, (function or "", path fragment)...): the first group with a frame in the stack takes the sample.
# Functions, not whole files, where a file also holds middleware (every request runs inside it).
GROUPS: list[tuple[str, tuple[tuple[str, str], ...]]] = [
    ("answer_html (markdown-it, nh3)", (("", "docquery/api/answer_html.py"),)),
    ("citations (snippets, clean fields)", (("citations", "docquery/rag/pipeline.py"),)),
    ("answer sanitiser", (("", "docquery/rag/sanitize"),)),
    ("search (BM25 query vector, Edge query, hits)", (("", "docquery/index/"),)),
    ("LLM call (aiohttp client)", (("", "docquery/generators/"),)),
    ("question embedding (hand-off to its thread)", (("", "docquery/embedders/"),)),
    ("audit chain and log lines", (("", "docquery/api/audit.py"), ("", "docquery/runtime/logs.py"))),
    (
        "auth, limits, tenant share",
        (
            ("verified_caller", "docquery/api/deps.py"),
            ("llm_slot", "docquery/api/deps.py"),
            ("", "docquery/api/fairshare.py"),
            ("take", "docquery/api/limits.py"),
            ("blocked", "docquery/api/limits.py"),
            ("check_question", "docquery/api/limits.py"),
            ("check_history", "docquery/api/limits.py"),
            ("check_top_k", "docquery/api/limits.py"),
        ),
    ),
]
OTHER = "HTTP and the rest (uvicorn, h11, Starlette, FastAPI, pydantic, asyncio)"


def _frame(identifier: str) -> tuple[str, str]:
    function, _, rest = identifier.partition("\x00")
    return function, rest.partition("\x00")[0]


def group_of(stack: list[str]) -> str | None:
    """The sample's group; None when it is not request work (outside the loop, or the loop idle)."""
    frames = [_frame(i) for i in stack]
    if not any(f == "_run_once" for f, _ in frames):
        return None
    if any(f == "select" and "selectors" in p for f, p in frames):
        return None
    for name, markers in GROUPS:
        for function, fragment in markers:
            if any(fragment in p and (not function or f == function) for f, p in frames):
                return name
    return OTHER


def breakdown(path: Path) -> str:
    from pyinstrument.session import Session

    session = Session.load(str(path))
    seconds: dict[str, float] = {}
    for stack, took in session.frame_records:
        group = group_of(stack)
        if group is not None:
            seconds[group] = seconds.get(group, 0.0) + took
    busy = sum(seconds.values()) or 1.0
    lines = ["| where the event loop's busy samples fall | share |", "|---|---:|"]
    for group, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {group} | {s / busy:.0%} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("session", type=Path, help="a pyinstrument session (api_cpu --profile FILE)")
    print(breakdown(ap.parse_args().session))


if __name__ == "__main__":
    main()
