"""The database anchors (Chroma, Milvus Lite, LanceDB; the `[anchors]` extra) on tiny data,
against numpy brute force: each finds the exact neighbours, honours filters, and (where it has
them) ranks by text and fuses; a missing library is skipped with a note naming the extra."""
import os

import numpy as np
import pytest

from hybridsearch.bench import corpora as C
from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters import databases as D
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.workloads import ann
from hybridsearch.bench.workloads.ecommerce import database_anchor

K = 10


def need(name: str) -> None:
    if not D.available(name):
        pytest.skip(D.skip_note(name))


def brute(X: np.ndarray, Q: np.ndarray, mask: np.ndarray | None = None) -> list:
    """Exact l2 top-K ids per query by numpy (among the rows of `mask`)."""
    d = ((Q[:, None, :].astype(np.float64) - X[None, :, :]) ** 2).sum(-1)
    if mask is not None:
        d[:, ~mask] = np.inf
    return [list(np.argsort(row, kind="stable")[:K]) for row in d]


def overlap(found: list, truth: list) -> float:
    return float(np.mean([len(set(map(int, f)) & set(t)) / len(t) for f, t in zip(found, truth)]))


@pytest.fixture(scope="module")
def vectors():
    X, Q = V.sift_like(2000, 20, dim=32)
    return X, Q, V.buckets(len(X))


@pytest.fixture(scope="module")
def catalogue():
    return C.products(600, 20, dim=32, embedder="projection")


@pytest.mark.parametrize("name", list(D.DATABASES))
def test_vector_rows_find_the_brute_force_neighbours_and_honour_filters(name, vectors):
    need(name)
    X, Q, bucket = vectors
    a = ann.adapter(name)
    a.build_timed(X, bucket, "l2", GraphConfig(16, 100, 2))
    try:
        assert a.build_s > 0 and a.note
        ef_wide = a.searcher(K, 128)
        assert overlap([a.ids(ef_wide(q)) for q in a.rows(Q)], brute(X, Q)) >= 0.9
        for pct in (10, 50):
            query, sel = V.below(bucket, pct)
            fn = a.searcher(K, 128, sel, query)
            found = [a.ids(fn(q)) for q in a.rows(Q)]
            assert all(sel.mask[f].all() for f in found)  # nothing outside the filter
            assert overlap(found, brute(X, Q, sel.mask)) >= 0.8, pct
    finally:
        a.close()
    assert not os.path.exists(a.work.path)  # the row's files are gone


@pytest.mark.parametrize("name", list(D.DATABASES))
def test_product_rows_answer_what_they_have_and_say_why_not_the_rest(name, catalogue):
    need(name)
    row = database_anchor(name, catalogue, [1], K)
    texts = catalogue.texts()
    in_cat = {str(i) for i, d in enumerate(catalogue.docs) if d["category"] == catalogue.filter["category"]}
    assert row["recall"]["vector"]["recall"] >= 0.9 and row["recall"]["vector"]["violations"] == 0
    assert row["recall"]["vector + filter"]["violations"] == 0
    assert all(set(ids) <= in_cat for ids, _ in row["hits"]["vector + filter"])
    for kind in ("lexical", "hybrid"):
        if name == "chroma":  # no ranked full-text search locally
            assert "not BM25" in row["queries"][kind]["error"]
            continue
        assert all(set(ids) <= in_cat for ids, _ in row["hits"][kind + " + filter"])
    if name != "chroma":
        # a query is 8 consecutive words of a title: the best lexical hit contains them
        top = [ids[0] for ids, _ in row["hits"]["lexical"]]
        assert np.mean([q in texts[int(t)] for q, t in zip(catalogue.queries, top)]) >= 0.8
        assert all(len(ids) == K for ids, _ in row["hits"]["hybrid"])
    assert row["writes"]["feed"]["qps"] > 0 and row["queries"]["vector"][0]["qps"] > 0


def test_a_missing_database_is_skipped_with_a_note_naming_the_extra(monkeypatch):
    monkeypatch.setattr(D, "installed", lambda module: module != "lancedb")
    usable, notes = D.split(["hnsw", "lancedb", "chroma"])
    assert usable == ["hnsw", "chroma"] and len(notes) == 1
    assert notes[0].startswith("lancedb: skipped") and "[anchors]" in notes[0]


def test_the_harness_selects_anchors_by_flag(monkeypatch):
    from hybridsearch.bench import cli
    assert cli.select_anchors("none") == ([], [])
    monkeypatch.setattr(D, "installed", lambda module: True)
    assert cli.select_anchors("all") == (list(D.DATABASES), [])
    assert cli.select_anchors("lancedb,chroma") == (["lancedb", "chroma"], [])
    with pytest.raises(SystemExit):
        cli.select_anchors("qdrant")
