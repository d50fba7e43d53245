"""Docs/contract.md documents encryption at rest end to end, and cannot drift from the code.

What is encrypted and what is not is derived from the payload the index really writes; the
settings and Vault paths from the settings model and the shipped policies.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docquery.config.settings import EncryptionSettings
from docquery.core.collection import Key
from docquery.core.domain import Chunk, IndexedChunk
from docquery.index.payload import chunk_payload

REPO = Path(__file__).resolve().parents[1]
CONTRACT = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")
SECTION = CONTRACT.split("### Encryption at rest", 1)[-1].split("\n## ", 1)[0]
# Payload keys that are structure, not document data: the point kind and the schema marker.
STRUCTURAL = {Key.KIND.value}


class _Marker:
    def encrypt(self, text: str, *, aad: str) -> str:
        return "CIPHERTEXT"

    def decrypt(self, token: str, *, aad: str) -> str:
        return token


def test_the_section_exists() -> None:
    assert "### Encryption at rest" in CONTRACT and len(SECTION) > 1500


def test_every_plaintext_payload_field_is_named_and_the_text_is_the_encrypted_one() -> None:
    chunk = Chunk(
        id="00000000-0000-0000-0000-000000000001",
        doc_id="d",
        source="s",
        title="t",
        chunk_index=0,
        text="secret body",
        content_sha256="0" * 64,
        acl_groups=("g",),
    )
    payload = chunk_payload(IndexedChunk(chunk=chunk, dense=[0.0]), _Marker())
    encrypted = {k for k, v in payload.items() if v == "CIPHERTEXT"}
    assert encrypted == {Key.TEXT.value}
    what_is_encrypted, what_is_not = SECTION.split("**What is not encrypted**", 1)
    assert f"`{Key.TEXT.value}`" in what_is_encrypted
    plain = {str(k) for k in payload} - encrypted - STRUCTURAL
    missing = sorted(k for k in plain if f"`{k}`" not in what_is_not)
    assert not missing, f"plaintext payload fields not documented as such: {missing}"
    assert "vectors" in what_is_not


@pytest.mark.parametrize("name", sorted(EncryptionSettings.model_fields))
def test_every_encryption_setting_is_explained(name: str) -> None:
    assert f"DOCQUERY_ENCRYPTION__{name.upper()}" in SECTION


@pytest.mark.parametrize("policy", ["ingest-encryption.hcl", "query-encryption.hcl"])
def test_the_vault_paths_are_the_policies(policy: str) -> None:
    text = (REPO / "policies" / "vault" / policy).read_text(encoding="utf-8")
    paths = re.findall(r'^path "([^"]+)"', text, re.M)
    assert len(paths) == 1 and policy in SECTION.replace("`policies/vault/", "`")
    mount, kind = paths[0].split("/")[:2]
    assert f"{mount}/{kind}" in SECTION


@pytest.mark.parametrize("topic", ["Rotating", "rotate", "min_decryption_version", "Turning it on", "in memory only"])
def test_rotation_and_lifecycle_are_covered(topic: str) -> None:
    assert topic in SECTION
