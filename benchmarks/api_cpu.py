"""The query path's CPU per answered request, through real processes, with every defence on.

Setup (all on 127.0.0.1): the first ``--docs`` SciFact documents (1,000) written out as ``.txt`` files with one
ACL file and ingested by ``docquery ingest`` (dense and BM25 vectors: hybrid search); the vLLM stand-in
(tests/support/standins/openai_server.py, run as a program; not vLLM) answering after ``--delay`` (50 ms);
``docquery serve`` (uvicorn) with API-key auth, the rate and failed-auth limiters, the LLM share by tenant, the
sanitiser, ``answer_html``, clean citation fields, the audit chain and JSON logs (to a file), all at their
defaults except the rate limit (raised out of the way; it is still checked on every request),
``llm.max_concurrency`` 64 (slots free for the 32 clients) and ``min_dense_score`` -1, so that every question is
answered (a refusal makes no LLM call). The questions are embedded as by default, by the bundled model inside the
service (``--embedder standin``: by the stand-in's ``/v1/embeddings``, outside it). ``--clients`` (32)
closed-loop clients post SciFact claims as JSON questions with ``top_k`` 5.

What is counted: the ``docquery serve`` process's own CPU (utime + stime of all its threads, from
``/proc/PID/stat``) over each round, divided by the answers of that round (status 200 with citations). CPU time,
not wall time, so the machine's other load moves it less. The stand-in (the LLM) and the load generator are
other processes, so their CPU is not in it. The same CPU is also given by thread: ``main`` (the event loop,
where each request's Python work runs), ``edge-search`` (the embedded engine's search threads) and ``python``
(Python's worker threads, which run the model; the OS name of a thread Python starts).

Rounds alternate between the source trees given with ``--tree`` (default: this checkout); each tree runs its own
``docquery serve`` over its own copy of one ingested collection, and the median of each tree's rounds is reported.

    SCIFACT_DIR=... .venv/bin/python -m benchmarks.api_cpu --rounds 5 --cache /tmp/dq-api-cpu
    SCIFACT_DIR=... .venv/bin/python -m benchmarks.api_cpu --tree /tmp/before --tree . --rounds 5
    SCIFACT_DIR=... .venv/bin/python -m benchmarks.api_cpu --profile /tmp/api-cpu.pyisession --rounds 1

``--profile FILE`` runs the (one) service under pyinstrument, saves the session to FILE and prints where the
event loop's samples fall (``benchmarks/api_cpu_profile.py``); CPU figures of a profiled run include the
profiler's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.api_overhead import (
    API_KEY,
    RawConnection,
    cpu_seconds,
    free_port,
    service_env,
    start_standin,
    wait_http,
    write_secrets,
)

ROOT = Path(__file__).resolve().parent.parent
GROUP = "bench"  # the benchmark key's group (write_secrets), so every document is readable


@dataclass
class Service:
    tree: Path
    proc: subprocess.Popen[bytes]
    port: int


@dataclass
class Round:
    tree: Path
    answered: int
    other: dict[int, int]
    cpu_s: float
    wall_s: float
    threads: dict[str, float]  # CPU seconds by thread name (threads that ended in the round are not in it)

    @property
    def cpu_ms(self) -> float:
        return self.cpu_s / max(1, self.answered) * 1000


def read_scifact(folder: Path, docs: int) -> tuple[list[dict[str, str]], list[str]]:
    corpus, questions = [], []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if len(corpus) >= docs:
                break
            corpus.append(json.loads(line))
    with (folder / "queries.jsonl").open(encoding="utf-8") as fh:
        questions = [json.loads(line)["text"] for line in fh]
    return corpus, questions


def ingest(corpus: list[dict[str, str]], work: Path, env: dict[str, str]) -> None:
    """``docquery ingest`` of the documents as files, through the stand-in's embeddings (as the service embeds)."""
    root = work / "corpus"
    root.mkdir()
    (root / ".docquery-acl.yaml").write_text(f"groups: [{GROUP}]\n", encoding="utf-8")
    for doc in corpus:
        (root / f"{doc['_id']}.txt").write_text(f"{doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "docquery.cli", "ingest", str(root), "--json"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"docquery ingest exited {done.returncode}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    print(f"ingested {len(corpus)} documents, {report['chunks_written']} chunks", flush=True)


def settings_env(work: Path, llm_base: str, embedder: str) -> dict[str, str]:
    """The product's defaults, except what the setup names (module docstring)."""
    env = {
        **service_env(work, write_secrets(work), llm_base, 0),
        "DOCQUERY_LLM__MAX_CONCURRENCY": "64",
        "DOCQUERY_LOG_LEVEL": "INFO",
        "HF_HUB_OFFLINE": "1",
    }
    del env["DOCQUERY_API__LLM_SHARE"]  # the default share
    if embedder == "local":  # the default: the bundled model in the service's own process
        env = {k: v for k, v in env.items() if not k.startswith("DOCQUERY_EMBEDDER__")}
    return env


def start(tree: Path, data: Path, env: dict[str, str], profile: Path | None) -> Service:
    port = free_port()
    serve = ["-m", "docquery.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    if profile is not None:
        serve = ["-m", "pyinstrument", "-r", "pyisession", "-o", str(profile), *serve]
    log = (data.parent / f"service-{port}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, *serve],
        cwd=tree,
        env={**env, "PYTHONPATH": str(tree), "DOCQUERY_DATA_DIR": str(data), "DOCQUERY_METRICS_PORT": str(free_port())},
        stdout=log,
        stderr=log,
    )
    wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    return Service(tree, proc, port)


def stop(service: Service) -> None:
    # SIGINT: uvicorn shuts down in order, so a profiler around it writes its session.
    service.proc.send_signal(signal.SIGINT)
    try:
        service.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        service.proc.kill()
        service.proc.wait()


async def drive(
    port: int, clients: int, requests: int, questions: list[str], delay: float
) -> tuple[int, dict[int, int]]:
    """``clients`` closed-loop clients, their first requests spread over one LLM delay (no lockstep)."""
    rng = random.Random(requests)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    remaining, answered, other = requests, 0, dict[int, int]()
    conns = [RawConnection("127.0.0.1", port) for _ in range(clients)]

    async def client(n: int, conn: RawConnection) -> None:
        nonlocal remaining, answered
        await asyncio.sleep(delay * n / clients)
        while remaining > 0:
            remaining -= 1
            body = json.dumps({"question": rng.choice(questions), "top_k": 5}).encode()
            status, _, payload = await conn.post("/v1/query", body, headers)
            if status == 200 and json.loads(payload)["citations"]:
                answered += 1
            else:
                other[status] = other.get(status, 0) + 1

    try:
        await asyncio.gather(*(client(n, c) for n, c in enumerate(conns)))
    finally:
        for c in conns:
            c.close()
    return answered, other


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process's threads: the main thread (the event loop), the others summed by thread name
    with its trailing number dropped (Python's own threads are all named after the program)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            head, _, rest = (task / "stat").read_text().rpartition(")")
        except OSError:
            continue  # the thread ended meanwhile
        name = "main" if task.name == str(pid) else head.partition("(")[2].rstrip("0123456789_-") or "?"
        fields = rest.split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def measure(service: Service, args: argparse.Namespace, questions: list[str], requests: int) -> Round:
    cpu0, threads0, t0 = cpu_seconds(service.proc.pid), thread_cpu(service.proc.pid), time.perf_counter()
    answered, other = asyncio.run(drive(service.port, args.clients, requests, questions, args.delay))
    wall, cpu = time.perf_counter() - t0, cpu_seconds(service.proc.pid) - cpu0
    threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu(service.proc.pid).items()}
    return Round(service.tree, answered, other, cpu, wall, threads)


def report(rounds: list[Round], trees: list[Path]) -> dict[str, object]:
    out: dict[str, object] = {}
    for tree in trees:
        mine = [r for r in rounds if r.tree == tree]
        cpu = [r.cpu_ms for r in mine]
        out[str(tree)] = {
            "cpu_ms_per_answer": [round(x, 2) for x in cpu],
            "median": round(statistics.median(cpu), 2),
            "answers_per_s": [round(r.answered / r.wall_s, 1) for r in mine],
            "not_answered": [r.other for r in mine],
            "cpu_ms_per_answer_by_thread": [
                {k: round(v / max(1, r.answered) * 1000, 2) for k, v in sorted(r.threads.items()) if v > 0}
                for r in mine
            ],
        }
    return out


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scifact", type=Path, nargs="?", default=os.environ.get("SCIFACT_DIR"))
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=1500, help="answers asked for in each round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per tree")
    ap.add_argument("--delay", type=float, default=0.05, help="the stand-in's time to first token, seconds")
    ap.add_argument("--tree", type=Path, action="append", help="a source tree to serve from (repeatable)")
    ap.add_argument(
        "--embedder",
        choices=("local", "standin"),
        default="local",
        help="local: the bundled model in the service (the default setting); standin: the stand-in's /v1/embeddings",
    )
    ap.add_argument(
        "--cache", type=Path, help="keep the ingested collection here and reuse it (same --docs, --embedder)"
    )
    ap.add_argument("--profile", type=Path, help="run the service under pyinstrument and save the session here")
    args = ap.parse_args()
    if args.scifact is None or not (Path(args.scifact) / "corpus.jsonl").is_file():
        ap.error("give a SciFact folder holding corpus.jsonl and queries.jsonl (or set SCIFACT_DIR)")
    args.tree = [t.resolve() for t in (args.tree or [ROOT])]
    if args.profile is not None and len(args.tree) != 1:
        ap.error("--profile runs one tree")
    return args


def main() -> None:
    args = parse_args()
    corpus, questions = read_scifact(Path(args.scifact), args.docs)
    work = Path(tempfile.mkdtemp(prefix="dq-cpu-"))
    standin, llm_base = start_standin(args.delay)
    services: list[Service] = []
    try:
        env = settings_env(work, llm_base, args.embedder)
        if args.cache is not None and (args.cache / "data").is_dir():
            shutil.copytree(args.cache / "data", work / "data")
        else:
            ingest(corpus, work, env)
            if args.cache is not None:
                shutil.copytree(work / "data", args.cache / "data")
        for n, tree in enumerate(args.tree):
            data = work / f"data-{n}"
            shutil.copytree(work / "data", data)
            services.append(start(tree, data, env, args.profile))
        for service in services:  # warm-up: imports, first queries, connection pools
            measure(service, args, questions, 200)
        rounds: list[Round] = []
        for i in range(args.rounds):
            order = services if i % 2 == 0 else services[::-1]
            for service in order:
                rounds.append(r := measure(service, args, questions, args.requests))
                print(
                    f"round {i + 1} {service.tree}: {r.cpu_ms:.2f} ms CPU per answer, {r.answered} answers "
                    f"({r.answered / r.wall_s:.0f}/s), not answered {r.other}, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        print(json.dumps({"embedder": args.embedder, "docs": len(corpus), **report(rounds, args.tree)}))
    finally:
        for service in services:
            stop(service)
        standin.terminate()
        standin.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    if args.profile is not None:
        from benchmarks.api_cpu_profile import breakdown

        print(breakdown(args.profile))


if __name__ == "__main__":
    main()
