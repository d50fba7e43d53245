"""Citations quote exactly: offsets locate each passage in its section, snippets are exact substrings."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from docquery.core.domain import AclFilter
from docquery.rag.citations import citations_for
from docquery.rag.sanitize import Sanitizer
from ingest.model import EXTRA_PIPELINE
from ingest.prepare.loaders import Limits, load
from tests.support.ingest_fixtures import IngestEnv, ingest_env, make_pdf, write

__all__ = ["ingest_env"]

_INSTALL = " ".join(
    f"Step {i} of the install guide explains how the agent number {i} is configured." for i in range(40)
)
_BOOKING = " ".join(f"Rooms on floor {i} are booked through the portal before noon." for i in range(30))


def test_every_stored_chunk_points_at_its_text_and_citations_quote_it(ingest_env: IngestEnv) -> None:
    write(ingest_env.docs / "guide.md", f"# Guide\n\n## Install\n\n{_INSTALL}\n\n## Booking\n\n{_BOOKING}\n")
    write(ingest_env.docs / "report.pdf", make_pdf([_BOOKING, "Page two says revenue grew < 5 % [x](http://e.test)."]))
    ingest_env.run()
    limits = Limits(max_file_bytes=10**7, max_expanded_bytes=10**8)
    acl = AclFilter.for_groups({"staff"})
    hits = asyncio.run(
        ingest_env.index.search(dense=None, text="install agent booked revenue", acl=acl, limit=50, mode="sparse")
    )
    assert {h.chunk.source for h in hits} == {"docs/guide.md", "docs/report.pdf"}  # the root folder, then the path
    seen_pages = set()
    for hit in hits:
        c = hit.chunk
        doc = load(ingest_env.docs.parent / c.source, (ingest_env.docs.parent / c.source).read_bytes(), limits)
        assert c.section is not None and c.char_start is not None and c.char_end is not None
        section = doc.sections[c.section]
        assert section.text[c.char_start : c.char_end] == c.text
        assert section.page == c.page
        seen_pages.add(c.page)
    assert {"Guide > Install", "Guide > Booking", "p. 1", "p. 2"} <= seen_pages  # heading paths and pages
    citations = citations_for(hits, clean=Sanitizer())
    for hit, cite in zip(hits, citations, strict=True):
        assert (cite.section, cite.char_start, cite.char_end) == (
            hit.chunk.section,
            hit.chunk.char_start,
            hit.chunk.char_end,
        )
        assert hit.chunk.text[cite.snippet_start : cite.snippet_end] == cite.snippet
        assert cite.snippet_truncated == (cite.snippet != hit.chunk.text)
        assert "…" not in cite.snippet


def test_documents_chunked_by_the_former_chunker_are_reindexed(ingest_env: IngestEnv) -> None:
    write(ingest_env.docs / "guide.md", f"# Guide\n\n{_INSTALL}\n")
    first = ingest_env.run()
    assert first.added == 1
    (record,) = ingest_env.index.list_documents()
    # What the token-window chunker's build stored: "chunks=<size>/<overlap>".
    old = {**record.extra, EXTRA_PIPELINE: "v1;chunks=200/30;quarantine=1"}
    ingest_env.index.put_document(replace(record, extra=old))
    again = ingest_env.run()
    assert (again.updated, again.unchanged) == (1, 0)
    (record,) = ingest_env.index.list_documents()
    assert "chunks=sentences3/200/30" in record.extra[EXTRA_PIPELINE]
    assert ingest_env.run().unchanged == 1


def test_later_chunks_are_found_by_their_documents_title(ingest_env: IngestEnv) -> None:
    write(ingest_env.docs / "guide.md", f"# Zqtitleword handbook\n\n{_INSTALL}\n\n{_BOOKING}\n")
    ingest_env.run()
    acl = AclFilter.for_groups({"staff"})
    hits = asyncio.run(ingest_env.index.search(dense=None, text="zqtitleword", acl=acl, limit=50, mode="sparse"))
    assert len({h.chunk.chunk_index for h in hits}) > 2  # not only the chunk that holds the heading
    assert all("zqtitleword" not in h.chunk.text.lower() for h in hits if h.chunk.chunk_index > 0)
