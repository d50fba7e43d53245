"""The real-documents evaluation: ingest a public HTML manual, ask everyday questions, and measure
what a user gets back.

    .venv/bin/python -m benchmarks.realdocs.build [--package P]   # once: fetch and copy the pages
    .venv/bin/python -m benchmarks.realdocs.evaluate [--corpus DIR] [--product DIR] [--json out.json]

``--product`` is the source tree whose DocQuery is measured (default: this one), so the same
evaluation runs before and after a change (e.g. ``git archive BASE | tar -x -C /tmp/base``).
Ingest runs as ``docquery ingest CORPUS --groups staff`` into a fresh data dir; the corpus's
questions (questions.json for PostgreSQL's manual, questions-python.json for Python's: build.py's
``CORPORA``) are then searched in-process with that tree's pipeline (top 5 passages) and
the extractive generator answers from the passages it would be given.

What is reported, per run, and how each is defined:

- **hit@1, hit@3**: the share of questions whose first page, or one of the first three distinct
  pages, among the returned passages is a page that answers it (pages are paths under the corpus).
- **furniture**: a returned passage that is site furniture: one that holds a line of the furniture
  vocabulary below (navigation, "Prev Up Home Next", "Table of Contents", "Show Source", ...) or a
  permalink mark (¶), or that holds no code block, no table row and no line of six words or more
  (a list of links, a table of contents).
- **stub**: a returned passage with fewer than 40 characters of text once fence lines are removed.
- **damaged code**: a returned passage, or an extractive answer, in which three consecutive lines
  of one of its page's ``<pre>`` blocks (8 characters or more each) appear one after the other with
  their words, but the first is on no line of its own (line breaks flattened) or only in its
  whitespace-folded form (indentation and alignment lost).
- **stitched bullets**: an extractive answer's bullet whose text (less its [Sk] marker) is not one
  contiguous run of the cited passage's text, whitespace folded; a bullet with an ellipsis must be
  contiguous runs, in order, between its ellipses.
- **ingest seconds and peak RSS**: wall time of ``docquery ingest``; the largest resident set of any
  one of its processes (``getrusage(RUSAGE_CHILDREN)``: the ingest process or its parse process);
  the peak of the ingest process and the largest peak of any process under it (the parse
  process), each its kernel high-water mark (``VmHWM``) read from /proc every 0.2 s; and the
  largest sum over its process tree, sampled alike.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CORPUS = Path.home() / ".cache" / "docquery" / "realdocs" / "corpus" / "postgresql-doc-15"
TOP_K = 5

FURNITURE_LINES = re.compile(
    r"^\s*(?:table of contents|contents|previous topic|next topic|this page|report a bug|show source|"
    r"edit on github|edit this page|view page source|quick search|navigation|search|prev|next|up|home|"
    r"prev\s+up\s+home\s+next|prev\s+up\s+next|prev\s+next|skip to (?:main )?content|on this page|"
    r"submit correction|copyright.*|©.*)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
SENTENCE_WORDS = 6
WORD = re.compile(r"\w+")
FENCE_LINE = re.compile(r"^ {0,3}(?:`{3,}|~{3,}).*$", re.MULTILINE)
CODE_BLOCK = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n.*?^ {0,3}\1[ \t]*$", re.MULTILINE | re.DOTALL)
TABLE_ROW = re.compile(r"\S \| \S")
MARKER = re.compile(r"\s*\[S\d+\]\s*$")
ELLIPSIS = re.compile(r"\s*(?:…|\.\.\.)\s*")
STUB_CHARS = 40
CODE_LINE_MIN = 8


def fold(text: str) -> str:
    return " ".join(text.split())


def is_stub(text: str) -> bool:
    return len(fold(FENCE_LINE.sub("", text))) < STUB_CHARS


def is_furniture(text: str) -> bool:
    if "¶" in text or FURNITURE_LINES.search(text):
        return True
    has_code = CODE_BLOCK.search(text) is not None
    prose = CODE_BLOCK.sub(" ", text)
    has_rows = TABLE_ROW.search(prose) is not None
    has_sentence = any(len(WORD.findall(line)) >= SENTENCE_WORDS for line in prose.split("\n"))
    return not has_code and not has_rows and not has_sentence


def pre_blocks(page: Path) -> list[list[str]]:
    """The lines of each of the page's ``<pre>`` blocks, trailing spaces removed, blank lines left out."""
    import lxml.html  # type: ignore[import-untyped]  # no stubs

    tree = lxml.html.fromstring(page.read_bytes())
    return [[ln.rstrip() for ln in pre.text_content().split("\n") if ln.strip()] for pre in tree.iter("pre")]


def damaged(text: str, blocks: list[list[str]]) -> list[str]:
    """Code lines the text holds with their words but not as they were. For three consecutive lines
    of a ``<pre>`` block (8 characters or more each; two for a block of two lines) found one after
    the other, whitespace folded (fewer would match inside one line of prose or of other code):
    the first is damaged when no line of the text holds it (line breaks flattened), or when a line
    of the text is exactly its folded form while it had indentation or runs of spaces, and no line
    holds it as it was (whitespace lost)."""
    folded = fold(text)
    own = {ln.rstrip() for ln in text.split("\n")}
    own_folded = {fold(ln) for ln in own}
    out = []
    for lines in blocks:
        width = min(3, len(lines))
        if width < 2:  # a one-line block cannot be flattened, and its text matches inside other lines
            continue
        for i in range(len(lines) - width + 1):
            run = lines[i : i + width]
            if min(len(ln.strip()) for ln in run) < CODE_LINE_MIN or fold(" ".join(run)) not in folded:
                continue
            a = run[0]
            flattened = fold(a) not in own_folded
            squashed = a != fold(a) and a not in own and fold(a) in own
            if flattened or squashed:
                out.append(a)
    return out


def stitched(bullet: str, passage: str) -> bool:
    passage = fold(passage)
    at = 0
    for part in ELLIPSIS.split(fold(bullet)):
        if not part:
            continue
        found = passage.find(part, at)
        if found < 0:
            return True
        at = found + len(part)
    return False


def page_of(source: str, corpus: Path) -> str:
    """A passage's page as the questions name it: its path under the corpus folder. A source is
    that path under the folder ingested (``CORPUS/library/csv.html``), or an absolute one."""
    path = Path(source)
    if path.is_absolute():
        return path.relative_to(corpus.resolve()).as_posix()
    if path.parts[:1] == (corpus.name,):
        return Path(*path.parts[1:]).as_posix()
    raise ValueError(f"{source} is not a page of {corpus}")


def _high_water_kb(pid: int) -> int:
    """The kernel's peak resident set of ``pid`` so far (VmHWM), in KiB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree_rss_kb(root: int) -> dict[int, int]:
    """Resident set of ``root`` and of each of its descendants now (Linux /proc), in KiB."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(stat.parent.name)
        parent[pid] = int(fields[1])
        rss[pid] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    tree, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        grew = bool(more)
        tree |= more
    return {p: rss.get(p, 0) for p in tree}


def run_ingest(product: Path, corpus: Path, data_dir: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(product), "DOCQUERY_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-c", "import sys; from docquery.cli import main; sys.exit(main())"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, "ingest", str(corpus), "--groups", "staff", "--json"],
        env=env,
        cwd=product,  # python -c puts its working directory first on sys.path, ahead of PYTHONPATH
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak_tree_kb = peak_main_kb = peak_child_kb = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_tree_kb, peak_main_kb, peak_child_kb
        while not stop.wait(0.2):
            tree = _tree_rss_kb(proc.pid)
            peak_tree_kb = max(peak_tree_kb, sum(tree.values()))
            peak_main_kb = max(peak_main_kb, _high_water_kb(proc.pid))
            peak_child_kb = max([peak_child_kb, *(_high_water_kb(p) for p in tree if p != proc.pid)])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    stop.set()
    sampler.join()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"ingest failed ({proc.returncode}): {err.strip()[-2000:]}")
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(peak_mb),
        "peak_tree_rss_mb": round(peak_tree_kb / 1024),
        "peak_ingest_process_mb": round(peak_main_kb / 1024),
        "peak_parse_process_mb": round(peak_child_kb / 1024),
        "report": json.loads(out),
    }


def run_queries(product: Path, data_dir: Path, out: Path, questions: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(product), "DOCQUERY_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--query-phase", str(out), "--questions", str(questions)]
    subprocess.run(argv, env=env, cwd=product, check=True)


def query_phase(out: Path, questions_file: Path) -> None:
    """Runs inside the measured tree (its PYTHONPATH): search, then the extractive generator."""
    import asyncio

    from docquery.config.settings import load_settings
    from docquery.core.domain import Principal
    from docquery.generators.extractive import ExtractiveGenerator
    from docquery.rag.prompting import build_prompt
    from docquery.wiring import build_components

    questions = json.loads(questions_file.read_text())["questions"]
    components = build_components(load_settings(), create_index=False)
    principal = Principal(id="realdocs", groups=frozenset({"staff"}))
    generator = ExtractiveGenerator()

    async def ask_all() -> list[dict[str, Any]]:
        rows = []
        for item in questions:
            hits = components.pipeline.relevant(await components.pipeline.search(item["q"], principal, TOP_K))
            answer = generator.render(build_prompt(item["q"], hits))
            rows.append(
                {
                    "q": item["q"],
                    "passages": [{"source": h.chunk.source, "page": h.chunk.page, "text": h.chunk.text} for h in hits],
                    "answer": answer,
                }
            )
        await components.release_loop_resources()
        return rows

    try:
        out.write_text(json.dumps(asyncio.run(ask_all())))
    finally:
        components.close()


def score(rows: list[dict[str, Any]], corpus: Path, questions_file: Path) -> dict[str, Any]:
    questions = {q["q"]: set(q["pages"]) for q in json.loads(questions_file.read_text())["questions"]}
    hit1 = hit3 = passages = furniture = stubs = bad_passages = answers_damaged = 0
    bullets = stitched_bullets = 0
    examples: dict[str, list[str]] = {"furniture": [], "stub": [], "damaged": [], "stitched": []}
    code_of: dict[str, list[list[str]]] = {}
    for row in rows:
        gold = questions[row["q"]]
        pages = list(dict.fromkeys(page_of(p["source"], corpus) for p in row["passages"]))
        hit1 += bool(pages[:1] and pages[0] in gold)
        hit3 += bool(set(pages[:3]) & gold)
        answer_damage = False
        for p in row["passages"]:
            passages += 1
            name = page_of(p["source"], corpus)
            if name not in code_of:
                code_of[name] = pre_blocks(corpus / name)
            text = p["text"]
            if is_stub(text):
                stubs += 1
                examples["stub"].append(f"{name}: {fold(text)[:80]}")
            elif is_furniture(text):
                furniture += 1
                examples["furniture"].append(f"{name}: {fold(text)[:80]}")
            if damaged(text, code_of[name]):
                bad_passages += 1
                answer_damage = True
                examples["damaged"].append(f"{name}: {damaged(text, code_of[name])[0][:80]}")
        for line in row["answer"].splitlines():
            if not line.startswith("- "):
                continue
            m = re.search(r"\[S(\d+)\]\s*$", line)
            if m is None or int(m.group(1)) > len(row["passages"]):
                continue
            bullets += 1
            cited = row["passages"][int(m.group(1)) - 1]
            if stitched(MARKER.sub("", line[2:]), cited["text"]):
                stitched_bullets += 1
                examples["stitched"].append(fold(line)[:100])
            if damaged(line, code_of[page_of(cited["source"], corpus)]):
                answer_damage = True
        answers_damaged += answer_damage
    n = len(rows)
    return {
        "questions": n,
        "hit@1": round(hit1 / n, 3),
        "hit@3": round(hit3 / n, 3),
        "passages": passages,
        "furniture_or_stub_share": round((furniture + stubs) / max(1, passages), 3),
        "furniture": furniture,
        "stubs": stubs,
        "passages_with_damaged_code": bad_passages,
        "answers_with_damaged_code": answers_damaged,
        "bullets": bullets,
        "stitched_bullets": stitched_bullets,
        "examples": {k: v[:5] for k, v in examples.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the folder build.py printed")
    ap.add_argument("--product", type=Path, default=REPO, help="the source tree to measure")
    ap.add_argument("--label", default="", help="a name for this run in the output")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--keep", type=Path, default=None, help="keep the ingest figures and answers here (a folder)")
    ap.add_argument("--rescore", type=Path, default=None, help="score a --keep folder again, without running")
    ap.add_argument("--questions", type=Path, default=None, help="default: the corpus's own (build.py)")
    ap.add_argument("--query-phase", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.query_phase is not None:  # runs in the measured tree, which may not hold this package
        query_phase(args.query_phase, args.questions)
        return 0
    from benchmarks.realdocs.build import questions_for

    questions = args.questions or questions_for(args.corpus)
    if args.rescore is not None:
        kept = json.loads((args.rescore / "ingest.json").read_text())
        rows = json.loads((args.rescore / "rows.json").read_text())
        return _emit(args, kept, score(rows, args.corpus, questions))
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus}: run benchmarks/realdocs/build.py first")
    with tempfile.TemporaryDirectory(prefix="realdocs-") as tmp:
        data_dir = Path(tmp) / "data"
        ingest = run_ingest(args.product.resolve(), args.corpus, data_dir)
        rows_file = Path(tmp) / "rows.json"
        run_queries(args.product.resolve(), data_dir, rows_file, questions)
        rows = json.loads(rows_file.read_text())
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / "ingest.json").write_text(json.dumps(ingest))
            (args.keep / "rows.json").write_text(json.dumps(rows))
    return _emit(args, ingest, score(rows, args.corpus, questions))


def _emit(args: argparse.Namespace, ingest: dict[str, Any], figures: dict[str, Any]) -> int:
    report = ingest["report"]
    figures = {
        "label": args.label,
        "product": str(args.product),
        "pages": len(list(args.corpus.rglob("*.html"))),
        "chunks": report.get("chunks_written"),
        "html_whole_body": report.get("html_whole_body"),
        "ingest_seconds": ingest["seconds"],
        "ingest_peak_rss_mb": ingest["peak_rss_mb"],
        "ingest_peak_tree_rss_mb": ingest.get("peak_tree_rss_mb"),
        "ingest_peak_ingest_process_mb": ingest.get("peak_ingest_process_mb"),
        "ingest_peak_parse_process_mb": ingest.get("peak_parse_process_mb"),
        **figures,
    }
    text = json.dumps(figures, indent=2, ensure_ascii=False)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
