"""Every parser of untrusted input is bounded: linear on adversarial input, and run
under the parse process's time limit.

Each case doubles an adversarial input twice and compares the times of each doubling: linear
work about doubles, quadratic work quadruples. The base size grows until one run takes long
enough to time (so a loaded machine's noise does not decide), and the bound is generous.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ingest.model import FileRejected, PlannedDoc, SourceFile
from ingest.prepare.loaders import LOADERS, Limits, load
from ingest.prepare.parsing import isolated
from ingest.prepare.scan import scan_and_strip

LIMITS = Limits(max_file_bytes=10**9, max_expanded_bytes=10**9)


def _md(make: Callable[[int], str]) -> Callable[[int], object]:
    return lambda n: load(Path("a.md"), make(n).encode(), LIMITS)


def _html(make: Callable[[int], str]) -> Callable[[int], object]:
    def run(n: int) -> object:
        try:
            return load(Path("a.html"), make(n).encode(), LIMITS)
        except FileRejected as exc:  # refusing past a budget is bounded too
            return exc.reason

    return run


def _scan(make: Callable[[int], str]) -> Callable[[int], object]:
    return lambda n: scan_and_strip(make(n))


CASES: dict[str, Callable[[int], object]] = {
    "md comment opener repeated": _md(lambda n: "<!--" * n),  # the review's: x4 per doubling
    "md unclosed comment then text": _md(lambda n: "a <!-- " + "b " * n),
    "md ATX closing run": _md(lambda n: "# " + " #" * n + "x"),
    "md hidden span unclosed, repeated": _md(lambda n: "<span hidden>" * n),
    "md open tags never closed": _md(lambda n: "<a " * n),
    "md lone angle brackets": _md(lambda n: "<" * n),
    "md link reference comment opener": _md(lambda n: "[//]: # (" * n),
    "md link reference lines": _md(lambda n: "[//]: # (x)\n" * n),
    "md brackets": _md(lambda n: "[" * n + "]:"),
    "md style attribute never closed": _md(lambda n: "<span style='" + "a" * n),
    "md many headings": _md(lambda n: "## h\ntext\n" * n),
    "html style rule without braces": _html(lambda n: "<style>" + "a" * n + "</style><p>x</p>"),  # the review's
    "html style rule openers": _html(lambda n: "<style>" + "a{" * n + "</style><p>x</p>"),
    "html style comment openers": _html(lambda n: "<style>" + "/*" * n + "</style><p>x</p>"),
    "html long inline style": _html(lambda n: "<p style='" + "a:b;" * n + "'>x</p>"),
    "html many hiding rules": _html(
        lambda n: "<style>" + "".join(f".c{i}{{display:none}}" for i in range(n)) + "</style><p class=c1>x</p>"
    ),
    "html many elements": _html(lambda n: "<style>.x{opacity:0}</style>" + "<p class=y>x</p>" * n),
    "scan line starts then marker": _scan(lambda n: "##\n" + "\n" * n + " system"),
    "scan spaces after a role word": _scan(lambda n: "system" + " " * n + "x assistant"),
    "scan ai then spaces": _scan(lambda n: "ai" + " " * n + "x must"),
    "scan image link openers": _scan(lambda n: "![" * n + " http ?="),
    "scan image link urls": _scan(lambda n: "![a](http://" * n + "?="),
    "scan invisible runs": _scan(lambda n: "é\u200b" * n),
}  # fmt: skip


def _best(run: Callable[[int], object], n: int) -> float:
    # This thread's CPU time: the work done, which other processes on a loaded machine do not inflate.
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        run(n)
        best = min(best, time.thread_time() - t0)
    return best


@pytest.mark.slow  # compares CPU times
@pytest.mark.parametrize("name", sorted(CASES))
def test_time_grows_linearly_when_the_input_doubles(name: str) -> None:
    run = CASES[name]
    n = 256
    base = _best(run, n)
    while base < 0.005 and n < 1 << 19:
        n *= 2
        base = _best(run, n)
    doubled, quadrupled = _best(run, 2 * n), _best(run, 4 * n)
    ratios = (doubled / max(base, 1e-4), quadrupled / max(doubled, 1e-4))
    # Linear work doubles per doubling, quadratic work quadruples; one noisy step is forgiven.
    assert min(ratios) < 3.2, f"{name}: x{ratios[0]:.1f} then x{ratios[1]:.1f} per doubling from n={n}"


def test_every_parsed_format_runs_under_the_time_limit() -> None:
    """Under the default parse mode, only plain text (decoded, never parsed) stays in-process."""
    pick = isolated("auto")
    for kind in LOADERS:
        src = SourceFile(root=Path("/r"), path=Path(f"/r/a{kind}"), rel=f"a{kind}", acl_groups=("g",),
                         acl_origin="--groups", kind=kind)  # fmt: skip
        in_process = not pick(PlannedDoc(source=src, doc_id="d", content_sha256="0", previous=None))
        assert in_process == (kind in (".txt", ".text")), kind
    sniffed = SourceFile(root=Path("/r"), path=Path("/r/README"), rel="README", acl_groups=("g",),
                         acl_origin="--groups", kind=".txt")  # fmt: skip
    assert not pick(PlannedDoc(source=sniffed, doc_id="d", content_sha256="0", previous=None))


def test_rules_times_elements_is_cut_off_by_the_match_budget() -> None:
    """Matching every rule against every element is quadratic by nature: past a budget of
    selector matches the file is refused (reported), never checked without bound."""
    from ingest.prepare.loaders.hidden import MAX_MATCHES

    n = int(MAX_MATCHES**0.5) + 50
    html = "<style>" + "p{color:red}" * n + "</style>" + "<p>x</p>" * n
    with pytest.raises(FileRejected, match="too complex"):
        load(Path("a.html"), html.encode(), LIMITS)
