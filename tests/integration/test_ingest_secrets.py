"""Credentials through the real pipeline and Edge index: files that hold them are skipped and reported,
passages that carry them are quarantined (never searchable), placeholders stay searchable, no report
carries a secret value, and a document indexed before the scan existed is re-scanned by the next run."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

import ingest.prepare.document as document_module
from docquery.core.domain import AclFilter
from ingest import pipeline
from ingest.discover.acl import ACL_FILE
from tests.support.ingest_fixtures import IngestEnv, ingest_env, write

__all__ = ["ingest_env"]

AWS_KEY = "AKIAQ3EGRVJ4KZ7WXPLM"
PASSWORD = "Vq8mZ2rTk9wQbN4s"
KEY_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi6Z3C2Qj5sJ4mZ7VfG0hYkL2pqZ8w"


def _corpus(env: IngestEnv) -> None:
    write(env.docs / ACL_FILE, "groups: [staff]\n")
    write(env.docs / "ops" / "id_rsa", f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\n")
    write(env.docs / "ops" / ".env", f"DB_PASSWORD={PASSWORD}\n")
    write(env.docs / "ops" / "server.pem", "certificate and key\n")
    write(
        env.docs / "ops" / "runbook.md",
        f"# Runbook\n\nRestart the queue workers every Monday morning.\n\n## Access\n\naws_access_key_id = {AWS_KEY}\n",
    )
    write(
        env.docs / "guide.md",
        "# Guide\n\nConnect with postgres://user:password@host:5432/db and set "
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE in the example profile.\n",
    )


def _search(env: IngestEnv, text: str) -> list[str]:
    hits = asyncio.run(
        env.index.search(dense=None, text=text, acl=AclFilter.for_groups({"staff"}), limit=20, mode="sparse")
    )
    return [h.chunk.text for h in hits]


def test_credentials_are_skipped_or_quarantined_and_never_reported(
    ingest_env: IngestEnv, caplog: pytest.LogCaptureFixture
) -> None:
    env = ingest_env
    _corpus(env)
    with caplog.at_level(logging.DEBUG):
        report = env.run(groups=None)
    skipped = {s["path"].rsplit("/", 1)[-1]: s["reason"] for s in report.skipped}
    assert set(skipped) == {"id_rsa", ".env", "server.pem"}
    assert all(reason.startswith("holds credentials") for reason in skipped.values())
    assert report.failed == [] and report.chunks_quarantined >= 1
    assert not any(AWS_KEY in t for t in _search(env, "aws_access_key_id"))
    assert any("Restart the queue workers" in t for t in _search(env, "queue workers Monday"))
    assert any("AKIAIOSFODNN7EXAMPLE" in t for t in _search(env, "example profile postgres"))
    # The report names each quarantined chunk: document, heading path, reason; never its text.
    assert report.as_json()["flagged"] == [
        {"path": str(env.docs / "ops" / "runbook.md"), "heading": "Runbook > Access", "reason": "secret",
         "action": "quarantined"}
    ]  # fmt: skip
    assert f"quarantined {env.docs / 'ops' / 'runbook.md'} [Runbook > Access]: secret" in report.plain_lines()
    everything = json.dumps(report.as_json()) + "\n".join(report.plain_lines()) + caplog.text
    for value in (AWS_KEY, PASSWORD, KEY_BODY):
        assert value not in everything


def test_a_document_indexed_before_the_scan_is_rescanned(
    ingest_env: IngestEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = ingest_env
    _corpus(env)
    in_thread = env.settings.model_copy(
        update={"ingest": env.settings.ingest.model_copy(update={"parse_process": "off"})}
    )
    with monkeypatch.context() as mp:  # as an earlier build indexed it: no secret scan
        mp.setattr(pipeline, "SCAN_VERSION", "0")
        mp.setattr(document_module, "scan_secrets", lambda text: frozenset())
        env.run(groups=None, settings=in_thread)
    assert any(AWS_KEY in t for t in _search(env, "aws_access_key_id"))
    report = env.run(groups=None)
    assert report.updated == 2  # every indexed document re-read under the new scan version
    assert not any(AWS_KEY in t for t in _search(env, "aws_access_key_id"))
