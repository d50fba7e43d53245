"""benchmarks/scale.py end to end on a tiny collection: the JSON line carries every figure the issue asks for."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

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
    argv = ["--chunks", "400", "--queries", "20", "--warmup", "2", "--recall-queries", "10", "--json"]
    assert module.main([*argv, "--keep", str(tmp_path / "data")]) == 0
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
    assert (tmp_path / "data" / "collections" / "scale" / "edge_config.json").exists()


def test_plot_draws_the_newest_run_of_each_size() -> None:
    spec = importlib.util.spec_from_file_location("scale_plot_bench", SCRIPT.parent / "scale_plot.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = [
        {"chunks": 200_000, "date": "2026-12-01T12:05:13+00:00", "run": "second"},
        {"chunks": 10_000, "date": "2026-12-01T09:10:00+00:00", "run": "small"},
        {"chunks": 200_000, "date": "2026-12-01T09:40:00+00:00", "run": "first"},
    ]
    assert [r["run"] for r in module.latest_per_size(rows)] == ["small", "second"]
