"""The per-tenant quotas (documents: 429, bytes: 413) count what a tenant sent either way: uploaded, or handed
over by ``docquery ingest --server`` (corpus ids and roots kept). A replaced document counts once, another
tenant's count is its own, and the rate limit counts refused requests too."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from docquery.api.uploads.rules import held_by
from docquery.core.uploads import EXTRA_TENANT, tenant_root
from tests.support.api_harness import Harness, JwtIssuer, make_harness
from tests.support.uploads import UPLOAD_KEYS, drain, hand_over, spooled, upload, write_upload_keys


def _ready(h: Harness) -> None:
    write_upload_keys(h.secrets_dir)
    deadline = time.monotonic() + 10
    while h.app.state.auth.api_keys.key_count() != 5 + len(UPLOAD_KEYS):  # the key file is read again
        assert time.monotonic() < deadline, "the key file was not read again"
        time.sleep(0.05)


def _refusal(r: Any) -> tuple[int, str, str]:
    error = r.json()["error"]
    return r.status_code, error["type"], error["message"]


@pytest.fixture
def h(tmp_path: Path, jwt_issuer: JwtIssuer) -> Iterator[Harness]:
    limits = {"tenant_max_documents": 3, "tenant_max_bytes": 200}
    limits |= {"rate_limit_per_minute": 100_000, "rate_limit_burst": 100_000}
    for harness in make_harness(tmp_path, jwks=jwt_issuer.jwks(), uploads=limits):
        _ready(harness)
        yield harness


def test_hand_overs_count_toward_the_document_quota(h: Harness) -> None:
    assert upload(h, "tok-up-eng", [("a.txt", b"a" * 40)], groups="eng").status_code == 202
    assert hand_over(h, "tok-up-eng2", [("x.txt", b"x" * 40), ("y.txt", b"y" * 40)]).status_code == 202
    drain(h)
    # The tenant holds three documents: one uploaded, two handed over (by another of its keys).
    over_upload = upload(h, "tok-up-eng", [("c.txt", b"c")], groups="eng")
    over_hand_over = hand_over(h, "tok-up-eng", [("z.txt", b"c")])
    assert _refusal(over_upload) == _refusal(over_hand_over)
    assert over_upload.status_code == 429 and "upload quota" in over_upload.json()["error"]["message"]
    # Sending a held document again replaces it: counted once, either way.
    assert hand_over(h, "tok-up-eng2", [("x.txt", b"X" * 40)]).status_code == 202
    assert upload(h, "tok-up-eng", [("a.txt", b"A" * 40)], groups="eng").status_code == 202
    drain(h)
    # Another tenant's count is its own.
    assert hand_over(h, "tok-up-other", [("other.txt", b"o" * 40)]).status_code == 202
    drain(h)
    assert spooled(h) == []


def test_hand_overs_count_toward_the_byte_quota(h: Harness) -> None:
    assert upload(h, "tok-up-eng", [("a.txt", b"a" * 40)], groups="eng").status_code == 202
    assert hand_over(h, "tok-up-eng", [("x.txt", b"x" * 100)]).status_code == 202
    drain(h)
    # 140 held: 70 more is past 200 whichever way it comes, with the same answer.
    over_upload = upload(h, "tok-up-eng", [("b.txt", b"b" * 70)], groups="eng")
    over_hand_over = hand_over(h, "tok-up-eng", [("w.txt", b"w" * 70)])
    assert _refusal(over_upload) == _refusal(over_hand_over)
    assert over_upload.status_code == 413 and "200" in over_upload.json()["error"]["message"]
    # Replacing the 100-byte hand-over with 150 bytes holds 190: it fits, as the replaced size leaves.
    assert hand_over(h, "tok-up-eng", [("x.txt", b"X" * 150)]).status_code == 202
    drain(h)
    assert spooled(h) == []


def test_a_tenant_s_records_are_found_either_way(h: Harness) -> None:
    upload(h, "tok-up-eng", [("a.txt", b"a")], groups="eng")
    hand_over(h, "tok-up-eng", [("x.txt", b"x")])
    drain(h)
    index = h.components.index
    held = held_by(index, "acme")
    assert sorted(r.source for r in held) == ["a.txt", "share/x.txt"]
    assert {r.extra[EXTRA_TENANT] for r in held} == {held[0].extra[EXTRA_TENANT]}
    assert held_by(index, "globex") == []
    # An upload recorded before records kept their tenant is still counted, by its root.
    (uploaded,) = (r for r in held if r.root == tenant_root("acme"))
    index.put_document(replace(uploaded, extra={k: v for k, v in uploaded.extra.items() if k != EXTRA_TENANT}))
    assert sorted(r.source for r in held_by(index, "acme")) == ["a.txt", "share/x.txt"]


def test_quotas_queue_and_rate_limit(tmp_path: Path, jwt_issuer: JwtIssuer) -> None:
    overrides = {"tenant_max_documents": 2, "tenant_max_bytes": 100, "rate_limit_per_minute": 1, "rate_limit_burst": 4}
    for h in make_harness(tmp_path, jwks=jwt_issuer.jwks(), uploads=overrides):
        _ready(h)
        assert upload(h, "tok-up-eng", [("a.txt", b"a" * 40)], groups="eng").status_code == 202
        drain(h)
        # Each refusal is one line naming the limit and what to do.
        over_bytes = upload(h, "tok-up-eng", [("b.txt", b"b" * 70)], groups="eng")
        assert _refusal(over_bytes) == (
            413,
            "payload_too_large",
            "upload quota: the tenant would hold 110 bytes of files, more than 100; delete some first",
        )
        over_docs = upload(h, "tok-up-eng", [("c.txt", b"c"), ("d.txt", b"d")], groups="eng")
        assert _refusal(over_docs) == (
            429,
            "rate_limited",
            "upload quota: the tenant would hold 3 documents, more than 2; delete some first",
        )
        # Replacing a document counts it once: a.txt again fits.
        assert upload(h, "tok-up-eng", [("a.txt", b"A" * 40)], groups="eng").status_code == 202
        drain(h)
        # Four requests spent the burst (refused ones count too); the next waits.
        limited = upload(h, "tok-up-eng", [("e.txt", b"e")], groups="eng")
        wait = int(limited.headers["Retry-After"])
        assert limited.status_code == 429 and wait >= 1
        assert limited.json()["error"]["message"] == (
            f"upload rate limit (1 requests/minute, burst 4, refused ones included) reached; retry in {wait} s"
        )
        assert spooled(h) == []
