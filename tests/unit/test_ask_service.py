"""The parts of ``ask`` through a service that need no service: the address record and the key file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from docquery.commands.ask_service import _refused, check_server_url, read_key
from docquery.commands.service_record import local_url, read_record, remove_record, write_record
from docquery.core.errors import ServiceUnavailable, UsageProblem


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("127.0.0.1", 8080, "http://127.0.0.1:8080"),
        ("0.0.0.0", 8080, "http://127.0.0.1:8080"),  # a wildcard is reached on loopback
        ("::", 9000, "http://[::1]:9000"),
        ("::1", 9000, "http://[::1]:9000"),
        ("10.1.2.3", 80, "http://10.1.2.3:80"),
        ("docquery.internal", 8080, "http://docquery.internal:8080"),
    ],
)
def test_the_recorded_url_is_one_this_machine_reaches(host: str, port: int, url: str) -> None:
    assert local_url(host, port) == url


def test_a_record_counts_only_for_the_process_holding_the_index(tmp_path: Path) -> None:
    path = tmp_path / "serve" / "docquery.json"
    assert write_record(path, "http://127.0.0.1:8080")
    assert read_record(path, os.getpid()) == "http://127.0.0.1:8080"
    assert read_record(path, os.getpid() + 1) is None  # left by a process that no longer holds the lock
    remove_record(path)
    assert not path.exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"not json", b"[1]", json.dumps({"pid": "1"}).encode(), json.dumps({"url": "http://x"}).encode()],
)
def test_a_malformed_record_is_no_record(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert read_record(path, 1) is None


def test_a_record_pointing_elsewhere_than_http_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    for url in ("file:///etc/passwd", "https://x", "ftp://x"):
        path.write_text(json.dumps({"pid": 7, "url": url}))
        assert read_record(path, 7) is None


def test_another_process_record_is_not_removed(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"pid": os.getpid() + 1, "url": "http://127.0.0.1:1"}))
    remove_record(path)
    assert path.exists()


def test_an_unwritable_data_dir_costs_only_the_shortcut(tmp_path: Path) -> None:
    (tmp_path / "serve").write_text("a file where the folder goes")
    assert not write_record(tmp_path / "serve" / "docquery.json", "http://127.0.0.1:8080")


@pytest.mark.parametrize(
    ("content", "key"), [(b"k-123\n", "k-123"), (b"  k-123  \r\n", "k-123"), (b"A" * 4096, "A" * 4096)]
)
def test_a_key_file_holds_the_key_alone(tmp_path: Path, content: bytes, key: str) -> None:
    path = tmp_path / "key"
    path.write_bytes(content)
    assert read_key(path) == key


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (b" \n\n", "is empty"),
        (b"k-1\nk-2\n", "one API key on one line"),
        (b"k 1", "one API key on one line"),
        (b"k-\x1b[31m", "one API key on one line"),
        ("clé".encode(), "one API key on one line"),
        (b"\xff\xfe", "one API key on one line"),
        (b"A" * 4097, "longer than an API key"),
    ],
)
def test_a_bad_key_file_is_refused_without_its_content(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "key"
    path.write_bytes(content)
    with pytest.raises(UsageProblem, match=expected) as refused:
        read_key(path)
    shown = content.decode(errors="ignore").strip()
    assert len(shown) < 3 or shown[:4] not in str(refused.value)


def test_a_missing_key_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(UsageProblem, match=r"cannot read .*: No such file or directory"):
        read_key(tmp_path / "nowhere")


@pytest.mark.parametrize("url", ["", "127.0.0.1:8080", "file:///x", "http://", "http://a b"])
def test_a_server_url_must_be_http(url: str) -> None:
    with pytest.raises(UsageProblem, match="--server: give the service's base URL"):
        check_server_url(url)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, UsageProblem),
        (403, UsageProblem),
        (422, UsageProblem),
        (429, ServiceUnavailable),
        (503, ServiceUnavailable),
    ],
)
def test_what_the_service_answers_maps_to_an_exit_code(status: int, kind: type[Exception]) -> None:
    assert type(_refused("http://127.0.0.1:1", status, "fixed text")) is kind
