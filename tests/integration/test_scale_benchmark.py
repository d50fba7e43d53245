"""benchmarks/scale.py end to end on a tiny collection: the JSON line carries every figure the issue asks for."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import disk_tail

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"
KEYS = {
    "hybrid_acl_p50_ms",
    "hybrid_acl_p99_ms",
    "dense_acl_p50_ms",
    "dense_acl_p99_ms",
    "recall_at_10",
    "write_chunks_per_s",
    "build_s",
    "peak_rss_mb",
    "peak_anon_mb",
    "build_peak_rss_mb",
    "serve_peak_rss_mb",
    "serve_peak_anon_mb",
    "disk_mb",
}


def test_scale_json_line_has_the_figures(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("scale_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale_bench"] = module  # dataclasses in the module resolve through sys.modules
    spec.loader.exec_module(module)
    readings = iter([0, 20, 0, 40, 0, 60, 0, 80])
    monkeypatch.setattr(module, "major_faults", lambda: next(readings))
    probed: list[tuple[Path, float]] = []
    real_probe = module.probe

    def recording_probe(path: Path, seconds: float) -> Any:
        probed.append((path, seconds))
        return real_probe(path, seconds)

    monkeypatch.setattr(module, "probe", recording_probe)
    argv = ["--chunks", "400", "--queries", "20", "--warmup", "2", "--recall-queries", "10", "--json"]
    assert module.main([*argv, "--keep", str(tmp_path / "data"), "--disk-probe-s", "0.1"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(result) >= KEYS
    assert result["chunks"] == 400 and result["backend"] == "edge"
    assert result["recall_at_10"] >= 0.95  # 400 chunks: every search is an exact scan
    assert set(result["callers"]) == {"1 group", "3 groups"}
    # Each timed loop reports the major faults between its first and last query, per query: the fake
    # counter above grows by 20, 40, 60 and 80 within the four loops of 20 queries (callers x modes).
    faults = [
        ("1 group", "hybrid", 1.0),
        ("1 group", "dense", 2.0),
        ("3 groups", "hybrid", 3.0),
        ("3 groups", "dense", 4.0),
    ]
    for caller, mode, per_query in faults:
        assert result["callers"][caller][f"{mode}_major_faults_per_query"] == per_query
    shard = tmp_path / "data" / "collections" / "scale"
    assert (shard / "edge_config.json").exists()
    # The disk is probed before and after the timed queries, on the collection's largest file, with
    # uncached reads; where the file system refuses them the figures are None, never cached reads.
    assert [s for _, s in probed] == [0.1, 0.1]
    assert probed[0][0] == probed[1][0] and probed[0][0].is_relative_to(shard)
    assert probed[0][0].stat().st_size == max(f.stat().st_size for f in shard.rglob("*") if f.is_file())
    refused = disk_tail.read_latencies(probed[0][0], 0.01) is None
    for key in ("disk_read_before", "disk_read_after"):
        figures = result[key]
        assert figures is None if refused else set(figures) == {"reads_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms"}
    assert module._disk_probe(shard, 0) is None  # --disk-probe-s 0: off
    assert module._disk_probe(None, 5.0) is None  # a server's files are not on this machine


def _plot_module() -> Any:
    spec = importlib.util.spec_from_file_location("scale_plot_bench", SCRIPT.parent / "scale_plot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNS = [
    {"chunks": 1_000_000, "date": "2026-12-03T13:34:45+00:00", "hybrid_acl_p99_ms": 242.3},
    {"chunks": 200_000, "date": "2026-12-03T12:52:47+00:00", "hybrid_acl_p99_ms": 8.6},
    {"chunks": 1_000_000, "date": "2026-12-03T12:42:31+00:00", "hybrid_acl_p99_ms": 23.7},
    {"chunks": 1_000_000, "date": "2026-12-02T01:00:00+00:00", "hybrid_acl_p99_ms": 41.0},  # another machine
    {"chunks": 1_000_000, "date": "2026-12-03T13:49:46+00:00", "hybrid_acl_p99_ms": 75.1},
    {"chunks": 200_000, "date": "2026-12-03T12:55:05+00:00", "hybrid_acl_p99_ms": None},  # not reported
]


def test_plot_draws_the_median_of_each_size_and_the_range_of_its_runs() -> None:
    plot = _plot_module()
    by_n = plot.runs_per_size(RUNS, since="2026-12-03")
    assert list(by_n) == [200_000, 1_000_000]
    assert [len(runs) for runs in by_n.values()] == [2, 3]
    assert plot.spread(by_n, "hybrid_acl_p99_ms") == [
        plot.Spread(200_000, 8.6, 8.6, 8.6, 1),
        plot.Spread(1_000_000, 75.1, 23.7, 242.3, 3),
    ]
    everything = plot.runs_per_size(RUNS)
    assert plot.spread(everything, "hybrid_acl_p99_ms")[-1] == plot.Spread(1_000_000, 58.05, 23.7, 242.3, 4)


def test_plot_writes_one_png_per_figure_and_refuses_an_empty_selection(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="a benchmark extra (make bench-setup), not part of make setup")
    plot = _plot_module()
    results = tmp_path / "results.jsonl"
    runs = [{**r, "recall_at_10": 1.0, "peak_rss_mb": 3300.0, "build_s": 700.0} for r in RUNS[:-1]]
    results.write_text(
        "\n".join(json.dumps(r) for r in [*runs, {"chunks": 10_000, "date": "2026-12-03T12:55:17"}]) + "\n"
    )
    assert plot.main([str(results), "--since", "2026-12-03", "--out", str(tmp_path / "img" / "scale")]) == 0
    pngs = sorted(p.name for p in (tmp_path / "img").iterdir())
    assert pngs == ["scale-build.png", "scale-latency.png", "scale-memory.png", "scale-recall.png"]
    assert all((tmp_path / "img" / name).read_bytes().startswith(b"\x89PNG") for name in pngs)
    with pytest.raises(SystemExit) as exit_info:
        plot.main([str(results), "--since", "2027-01-01", "--out", str(tmp_path / "none")])
    assert exit_info.value.code == 2
