"""`docquery ask` on a terminal shows the sanitised answer rendered: entities and escapes decoded once.

The sanitiser writes a literal "<" as "&lt;" (inert in markdown, and no tag if a client inserts it as HTML) and
keeps inline HTML as visible text; a renderer shows "<string>", and so does the terminal.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.markdown import Markdown

from docquery.rag.sanitize import Sanitizer

# What a document says -> what a reader must see (never HTML, never dropped).
SHOWN_AS_WRITTEN = [
    "std::vector<string> holds the names",
    "if a<b and c>d then swap",
    "<img src=x onerror=alert(1)>",
    "a <b>bold</b> word",
    "<script>alert(1)</script>",
    "AT&T and R&D",
    "1 < 2 > 0",
    "Map<K, V> and List<T>",
    "the <details> element",
    "x <string> y",
    "tags like </div> close",
]


@pytest.mark.parametrize("text", SHOWN_AS_WRITTEN)
def test_an_answer_renders_on_the_terminal_as_the_document_wrote_it(text: str) -> None:
    answer = Sanitizer().render(text)
    assert "<" not in answer
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(Markdown(answer, hyperlinks=False))
    assert out.getvalue().strip() == text


CODE_ANSWERS = [
    'Run it [S1]:\n\n```pycon\n>>> subprocess.run(["ls"], capture_output=True)\n\n>>> x[0]\n```',
    '- step one [S1]\n\n  ```\n  cfg["a"] = [1, 2]\n  print(cfg)\n  ```',
    ">>> import os\n>>> os.listdir('.')",
]


@pytest.mark.parametrize("answer", CODE_ANSWERS)
def test_code_in_an_answer_reads_on_the_terminal_line_by_line(answer: str) -> None:
    """`docquery ask` prints the sanitised answer as markdown: code keeps its lines, prompts and brackets."""
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(Markdown(Sanitizer()(answer), hyperlinks=False))
    shown = [line.strip() for line in out.getvalue().split("\n")]
    for line in answer.split("\n"):
        code = line.strip()
        if code.startswith((">>>", "cfg", "print")):
            assert code in shown, (code, out.getvalue())
