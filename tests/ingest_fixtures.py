"""Moved to tests/support/ingest_fixtures.py; this re-export keeps the old import path working."""

from tests.support.ingest_fixtures import (
    SCIFACT,
    CountingEmbedder,
    IngestEnv,
    ModelStandIn,
    index_state,
    ingest_env,
    make_docx,
    make_encrypted_pdf,
    make_pdf,
    make_zip_bomb_docx,
    scifact_docs,
    write,
)

__all__ = [
    "SCIFACT",
    "CountingEmbedder",
    "IngestEnv",
    "ModelStandIn",
    "index_state",
    "ingest_env",
    "make_docx",
    "make_encrypted_pdf",
    "make_pdf",
    "make_zip_bomb_docx",
    "scifact_docs",
    "write",
]
