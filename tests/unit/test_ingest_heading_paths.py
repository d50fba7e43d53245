"""HTML heading paths a person can read and find: no permalink glyphs, entities decoded once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.prepare.loaders import Limits, load

LIMITS = Limits(max_file_bytes=1_000_000, max_expanded_bytes=1_000_000)

# (h1 markup, h2 markup, expected path of the h2 section): the reviewers' `Path # > path.resolve() #` first.
HEADINGS = [
    (
        'Path<a class="headerlink" href="#path" title="Link to this heading">#</a>',
        '<code>path.resolve()</code><a class="headerlink" href="#pathlib.Path.resolve">#</a>',
        "Path > path.resolve()",
    ),
    ('Path<a class="headerlink" href="#p">¶</a>', 'Resolve <a href="#r">¶</a>', "Path > Resolve"),
    ('<a class="anchor" href="#p">§</a> Path', 'Resolve<a href="#r"> § </a>', "Path > Resolve"),
    ('Path <a href="#p" aria-label="permalink">🔗</a>', "Resolve <a href='#r'>🔗</a>", "Path > Resolve"),
    ('Path<a href="#p"><span>#</span></a>', 'Resolve<a href="#r"></a>', "Path > Resolve"),
    ('<a href="#p" class="headerlink">&#182;</a>Path', 'Resolve<a href="#r">&para;</a>', "Path > Resolve"),
    ('Path<a href="#p">&#x1F517;</a>', 'Resolve <a href="#r">-&gt;</a>', "Path > Resolve"),
    # Entities are decoded once: the reader sees <string>, never &lt;string&gt; (nor a double decode).
    ("Type &lt;string&gt;", "A &amp;lt; B", "Type <string> > A &lt; B"),
    # A link with words stays part of the heading: only glyph-only self-links are permalinks.
    ('See <a href="#intro">Intro</a>', 'The <a href="https://example.org/#x">#</a> sign', "See Intro > The # sign"),
    ('Path <a href="#p">#1</a>', "Resolve", "Path #1 > Resolve"),
    ("C# guide", "F# and #hashtags", "C# guide > F# and #hashtags"),
]


@pytest.mark.parametrize(("h1", "h2", "expected"), HEADINGS)
def test_heading_paths_have_no_permalink_glyphs(h1: str, h2: str, expected: str) -> None:
    html = f"<html><body><h1>{h1}</h1><p>intro text</p><h2>{h2}</h2><p>body text</p></body></html>"
    doc = load(Path("page.html"), html.encode(), LIMITS)
    pages = [s.page for s in doc.sections]
    assert pages[-1] == expected, pages
    assert all("body text" not in (p or "") for p in pages)
