"""Retrieval metrics on hand-computed cases, the BEIR loader, chunking, and ``eval retrieval`` end to end."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from docquery import cli
from docquery.chunking import ChunkSpec, RegexTokenizer, Section, chunk_sections
from docquery.config.settings import Settings
from docquery.evaluation.beir import BeirDataset, BeirDoc, DatasetError, load_beir, load_qrels
from docquery.evaluation.metrics import evaluate, mrr_at_k, ndcg_at_k, per_query, ranked, recall_at_k
from docquery.evaluation.progress import LineProgress
from docquery.evaluation.runner import EvalConfig, chunk_corpus, run_eval
from tests.support.fakes import HashEmbedder


# -- metrics -----------------------------------------------------------------------
def test_ndcg_binary_relevance_by_hand() -> None:
    # Relevant at ranks 2 and 4: DCG = 1/log2(3) + 1/log2(5); IDCG = 1/log2(2) + 1/log2(3).
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3)
    assert ndcg_at_k(["x", "a", "y", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["x", "a", "y", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(0.6509209)


def test_ndcg_graded_relevance_uses_linear_gains() -> None:
    # trec_eval/BEIR gain is rel itself: DCG = 1/1 + 2/log2(3); ideal = 2/1 + 1/log2(3).
    got = ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10)
    assert got == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))


def test_ndcg_cutoff_and_edge_cases() -> None:
    assert ndcg_at_k(["a"], {"a": 1}, 10) == 1.0
    assert ndcg_at_k(["x"] * 10 + ["a"], {"a": 1}, 10) == 0.0  # beyond the cutoff
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0  # judged but not relevant
    # Ideal DCG is cut at k too: 3 relevant, k=2, both top slots relevant -> 1.0.
    assert ndcg_at_k(["a", "b", "x"], {"a": 1, "b": 1, "c": 1}, 2) == pytest.approx(1.0)


def test_recall_by_hand() -> None:
    rels = {"a": 1, "b": 1, "c": 1, "z": 0}
    ranking = ["a", "x", "c", "z"]
    assert recall_at_k(ranking, rels, 10) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, rels, 1) == pytest.approx(1 / 3)
    assert recall_at_k(["x", "y"], rels, 100) == 0.0
    assert recall_at_k(["a"], {"a": 0}, 10) == 0.0


def test_mrr_by_hand() -> None:
    assert mrr_at_k(["x", "y", "a"], {"a": 1}, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["a", "b"], {"a": 1, "b": 1}, 10) == 1.0
    assert mrr_at_k(["x"] * 10 + ["a"], {"a": 1}, 10) == 0.0
    assert mrr_at_k(["z", "a"], {"z": 0, "a": 1}, 10) == pytest.approx(0.5)


def test_ranked_breaks_ties_by_id() -> None:
    assert ranked({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]


def test_evaluate_averages_over_judged_queries() -> None:
    run = {"q1": {"a": 0.9, "x": 0.5}, "q2": {"x": 0.9, "b": 0.1}}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}  # q3 has nothing relevant: skipped
    m = evaluate(run, qrels)
    assert m["ndcg@10"] == pytest.approx((1.0 + 1 / math.log2(3)) / 2)
    assert m["mrr@10"] == pytest.approx((1.0 + 0.5) / 2)
    assert m["recall@10"] == 1.0 and m["recall@100"] == 1.0


def test_evaluate_counts_a_query_without_results_as_zero() -> None:
    m = evaluate({"q1": {"a": 1.0}}, {"q1": {"a": 1}, "q2": {"b": 1}})
    assert m["ndcg@10"] == pytest.approx(0.5)
    assert m["recall@100"] == pytest.approx(0.5)


def test_per_query_scores_judged_queries_and_averages_to_evaluate() -> None:
    run = {"q1": {"a": 0.9, "x": 0.5}, "q2": {"x": 0.9, "b": 0.1}}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}, "q4": {"d": 2}}  # q3 unjudged, q4 no results
    scores = per_query(run, qrels)
    assert set(scores) == {"q1", "q2", "q4"}
    assert scores["q1"]["ndcg@10"] == 1.0
    assert scores["q2"]["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert scores["q4"] == dict.fromkeys(("ndcg@10", "recall@10", "recall@100", "mrr@10"), 0.0)
    means = evaluate(run, qrels)
    for key, mean in means.items():
        assert mean == pytest.approx(sum(s[key] for s in scores.values()) / 3)


# -- BEIR loader ---------------------------------------------------------------------
def write_beir(root: Path, docs: dict[str, tuple[str, str]], queries: dict[str, str], qrels: dict[str, Any]) -> Path:
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as fh:
        for doc_id, (title, text) in docs.items():
            fh.write(json.dumps({"_id": doc_id, "title": title, "text": text, "metadata": {}}) + "\n")
    with (root / "queries.jsonl").open("w") as fh:
        for qid, text in queries.items():
            fh.write(json.dumps({"_id": qid, "text": text, "metadata": {}}) + "\n")
    for split, rows in qrels.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in rows]
        (root / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return root


def test_loader_reads_corpus_queries_and_split(tmp_path: Path) -> None:
    root = write_beir(
        tmp_path / "ds",
        {"d1": ("Title one", "Text one"), "d2": ("", "Text two")},
        {"1": "first?", "2": "second?", "10": "tenth?", "7": "unjudged"},
        {"test": [("10", "d2", 1), ("1", "d1", 1), ("1", "d2", 0)], "train": [("2", "d2", 2)]},
    )
    ds = load_beir(root, "test")
    assert ds.corpus["d1"].title == "Title one" and ds.corpus["d2"].text == "Text two"
    assert list(ds.queries) == ["1", "10"]  # only judged queries, in natural order
    assert ds.qrels == {"1": {"d1": 1, "d2": 0}, "10": {"d2": 1}}
    assert load_beir(root, "train").qrels == {"2": {"d2": 2}}


def test_loader_errors_name_the_file_not_the_content(tmp_path: Path) -> None:
    root = write_beir(tmp_path / "ds", {"d1": ("t", "secret words")}, {"1": "q"}, {"test": [("1", "d1", 1)]})
    with pytest.raises(DatasetError, match=r"qrels/dev.tsv"):
        load_beir(root, "dev")
    (root / "qrels" / "bad.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\n")
    with pytest.raises(DatasetError, match="line 2 has 2 columns"):
        load_qrels(root / "qrels" / "bad.tsv")
    (root / "qrels" / "orphan.tsv").write_text("query-id\tcorpus-id\tscore\n99\td1\t1\n")
    with pytest.raises(DatasetError, match=r"absent from queries\.jsonl"):
        load_beir(root, "orphan")
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "secret words"}\nnot json secret\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl line 2 is not JSON") as err:
        load_beir(root, "test")
    assert "secret" not in str(err.value)


# -- chunking ------------------------------------------------------------------------
def _dataset(docs: dict[str, tuple[str, str]]) -> BeirDataset:
    return BeirDataset(corpus={d: BeirDoc(d, t, x) for d, (t, x) in docs.items()}, queries={}, qrels={})


def test_the_evaluation_chunks_each_document_exactly_as_ingest_does() -> None:
    tokenizer, spec = RegexTokenizer(), ChunkSpec(size=24, overlap=4)
    docs = {
        "short": ("A title", "some body text"),
        "untitled": ("", "body only"),
        "long": ("Long", "First paragraph of words.\n\n" + " ".join(f"word{i}" for i in range(120))),
    }
    chunks = chunk_corpus(_dataset(docs), tokenizer, spec)
    for doc_id, (title, text) in docs.items():
        as_file = f"{title}\n\n{text}" if title else text  # a text file whose first paragraph is the title
        ingest = [c.text for c in chunk_sections([Section(as_file)], tokenizer, spec)]
        assert [c.text for c in chunks if c.doc_id == doc_id] == ingest, doc_id
        assert [c.index for c in chunks if c.doc_id == doc_id] == list(range(len(ingest)))
    assert len([c for c in chunks if c.doc_id == "long"]) > 1


def test_whole_documents_keep_one_chunk_each() -> None:
    chunks = chunk_corpus(_dataset({"long": ("T", " ".join(["w"] * 2000))}), RegexTokenizer(), None)
    assert [(c.index, c.text[:3]) for c in chunks] == [(0, "T\n\n")]


def test_the_evaluation_uses_the_product_chunk_settings_by_default() -> None:
    ingest = Settings().ingest
    assert EvalConfig().chunks == ChunkSpec(ingest.chunk_tokens, ingest.chunk_overlap)


def test_line_progress_prints_counts_only() -> None:
    out = io.StringIO()
    p = LineProgress(out, every_s=0.0)
    p.start("embed corpus", 100)
    for _ in range(100):
        p.advance()
    p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == "embed corpus: 0/100"
    assert "embed corpus: 50/100 (50%)" in lines
    assert lines[-1].startswith("embed corpus: 100/100 done in")
    assert len(lines) == 12


# -- end to end ------------------------------------------------------------------------
TOPICS = {
    "d1": ("Vitamin D", "vitamin d deficiency bone density fracture risk elderly"),
    "d2": ("Insulin", "insulin resistance obesity type two diabetes glucose"),
    "d3": ("Malaria", "malaria parasite mosquito transmission africa vaccine"),
    "d4": ("Statins", "statins cholesterol cardiovascular events prevention trial"),
    "d5": ("Sleep", "sleep deprivation memory consolidation hippocampus"),
    "d6": ("Long", " ".join(["gut microbiome bacteria diversity antibiotics"] * 80)),
}
QUERIES = {
    "1": "does vitamin d lower fracture risk",
    "2": "insulin resistance and diabetes",
    "3": "mosquito malaria vaccine",
    "4": "statins prevent cardiovascular events",
    "5": "antibiotics reduce gut bacteria diversity",
}


@pytest.fixture
def tiny_beir(tmp_path: Path) -> Path:
    rows = [("1", "d1", 1), ("2", "d2", 1), ("3", "d3", 1), ("4", "d4", 1), ("5", "d6", 1)]
    return write_beir(tmp_path / "tiny", TOPICS, QUERIES, {"test": rows, "train": [("1", "d1", 1)]})


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_run_eval_end_to_end(tiny_beir: Path, tmp_path: Path, mode: Any) -> None:
    cache = tmp_path / "cache"
    result = run_eval(tiny_beir, HashEmbedder(), EvalConfig(mode=mode, cache_dir=cache))
    assert result.n_queries == 5 and result.n_docs == 6
    assert result.n_chunks > 6  # the long document was split
    assert result.metrics["ndcg@10"] == pytest.approx(1.0)
    assert result.metrics["mrr@10"] == pytest.approx(1.0)
    assert sorted(result.per_query) == ["1", "2", "3", "4", "5"]
    assert all(s["ndcg@10"] == pytest.approx(1.0) for s in result.per_query.values())
    if mode != "sparse":
        assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["corpus", "queries"]
        again = run_eval(tiny_beir, HashEmbedder(), EvalConfig(mode=mode, cache_dir=cache))
        assert again.metrics == result.metrics


def test_eval_cli_prints_one_json_object(
    tiny_beir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import docquery.wiring

    monkeypatch.setattr(docquery.wiring, "build_embedder", lambda settings: HashEmbedder())
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "no-secrets"))
    code = cli.main(["eval", "retrieval", str(tiny_beir), "--mode", "hybrid", "--json"])
    assert code == 0
    out = capsys.readouterr()
    payload = json.loads(out.out)
    assert set(payload) >= {"ndcg@10", "recall@10", "recall@100", "mrr@10", "mode", "n_queries"}
    assert payload["mode"] == "hybrid" and payload["n_queries"] == 5 and payload["split"] == "test"
    assert payload["ndcg@10"] == pytest.approx(1.0)
    assert "search hybrid: 5/5 done" in out.err  # progress log lines when not on a terminal
    assert payload["n_chunks"] > 6  # chunked as ingest chunks, not one chunk per document
    for text in QUERIES.values():
        assert text not in out.err  # progress and logs carry counts, not query text


def test_eval_cli_missing_dataset_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import docquery.wiring

    monkeypatch.setattr(docquery.wiring, "build_embedder", lambda settings: HashEmbedder())
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "no-secrets"))
    assert cli.main(["eval", "retrieval", str(tmp_path / "nowhere"), "--json"]) == 2
    assert f"the dataset directory {tmp_path / 'nowhere'} does not exist" in capsys.readouterr().err


def test_eval_builds_its_collection_with_the_index_settings(
    tiny_beir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """So an operator who changes DOCQUERY_QDRANT__QUANTIZATION or the HNSW settings measures what they change."""
    import docquery.wiring
    from docquery.evaluation import runner

    created: list[dict[str, Any]] = []
    real_open_edge = runner.open_edge

    def open_and_read_config(path: Path, **kwargs: Any) -> Any:
        index = real_open_edge(path, **kwargs)
        created.append(json.loads((path / "edge_config.json").read_text()))
        return index

    monkeypatch.setattr(runner, "open_edge", open_and_read_config)
    monkeypatch.setattr(docquery.wiring, "build_embedder", lambda settings: HashEmbedder())
    monkeypatch.setenv("DOCQUERY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DOCQUERY_SECRETS_DIR", str(tmp_path / "no-secrets"))
    monkeypatch.setenv("DOCQUERY_QDRANT__QUANTIZATION", "turbo4")
    monkeypatch.setenv("DOCQUERY_QDRANT__HNSW_M", "8")
    assert cli.main(["eval", "retrieval", str(tiny_beir), "--mode", "dense", "--json"]) == 0
    (config,) = created
    assert config["hnsw_config"]["m"] == 8
    assert config["quantization_config"] == {"turbo": {"bits": "bits4", "memory": "pinned"}}
    assert json.loads(capsys.readouterr().out)["ndcg@10"] == pytest.approx(1.0)
