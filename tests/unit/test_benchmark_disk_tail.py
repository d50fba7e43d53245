"""benchmarks/disk_tail.py: uncached reads of a real file, and the figures it reports from them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks import disk_tail


def _file(path: Path, blocks: int) -> Path:
    path.write_bytes(bytes(range(256)) * (disk_tail.BLOCK // 256) * blocks)
    return path


def test_summary_reports_rate_and_percentiles_of_the_reads() -> None:
    ms = [float(i) for i in range(1, 1001)]  # 1 to 1000 ms, ascending
    assert disk_tail.summary(ms, seconds=2.0) == {
        "reads_per_s": 500,
        "p50_ms": 500.5,
        "p99_ms": 990.01,
        "p999_ms": 999.001,
        "max_ms": 1000.0,
    }


class _Recorder(random.Random):
    """Records every block index the probe draws."""

    def __init__(self) -> None:
        super().__init__(3)
        self.drawn: list[int] = []

    def randrange(self, *args: int) -> int:  # type: ignore[override]
        out = super().randrange(*args)
        self.drawn.append(out)
        return out


def _storage_read_bytes() -> int:
    """Bytes this process has had read from storage (``/proc/self/io``): the page cache's answers do not count."""
    io = Path("/proc/self/io")
    if not io.exists():
        pytest.skip("no per-task I/O accounting here")
    return next(int(line.split()[1]) for line in io.read_text().splitlines() if line.startswith("read_bytes:"))


def test_reads_whole_blocks_of_the_file_bypassing_the_page_cache(tmp_path: Path) -> None:
    path = _file(tmp_path / "matrix.dat", blocks=64)  # just written: every block is in the page cache
    rng = _Recorder()
    before = _storage_read_bytes()
    ms = disk_tail.read_latencies(path, 0.2, rng=rng)
    if ms is None:
        pytest.skip(f"{tmp_path}: this file system refuses O_DIRECT")
    # Each read went to the device, though the page cache held the block: a buffered read adds nothing here.
    assert _storage_read_bytes() - before >= disk_tail.BLOCK * len(ms)
    assert len(ms) == len(rng.drawn) > 10
    assert ms == sorted(ms) and ms[0] > 0
    assert all(0 <= b < 64 for b in rng.drawn)
    assert len(set(rng.drawn)) > 1  # random blocks, not one block read again


def test_a_file_under_one_block_is_not_probed(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * (disk_tail.BLOCK - 1))
    assert disk_tail.read_latencies(small, 0.1) is None
    assert disk_tail.probe(small, 0.1) is None


def test_largest_file_finds_the_biggest_under_a_tree(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "c").mkdir(parents=True)
    _file(tmp_path / "a" / "small", 1)
    big = _file(tmp_path / "b" / "c" / "matrix.dat", 8)
    assert disk_tail.largest_file(tmp_path) == big
    (tmp_path / "empty").mkdir()
    assert disk_tail.largest_file(tmp_path / "empty") is None


def test_cli_prints_one_json_line_and_refuses_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path / "matrix.dat", 16)
    if disk_tail.read_latencies(path, 0.01) is None:
        pytest.skip(f"{tmp_path}: this file system refuses O_DIRECT")
    assert disk_tail.main([str(path), "--seconds", "0.1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["file"] == str(path) and out["reads_per_s"] > 0 and out["p50_ms"] <= out["max_ms"]
    with pytest.raises(SystemExit) as exit_info:
        disk_tail.main([str(tmp_path / "absent")])
    assert exit_info.value.code == 2
    assert "absent: not a file" in capsys.readouterr().err
