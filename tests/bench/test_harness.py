"""The benchmark harness's metric code against hand-computed values, the dataset readers, and a
tiny end-to-end run of the report writer."""
import json
import math

import numpy as np
import pytest

from hybridsearch.bench import datasets as D
from hybridsearch.bench import metrics as M
from hybridsearch.bench import report as R


def test_recall_at_k():
    assert M.recall_at_k([1, 2, 3], [3, 2, 9], k=3) == pytest.approx(2 / 3)
    assert M.recall_at_k([], [1, 2], k=2) == 0.0
    assert M.recall_at_k([5], [], k=10) == 1.0
    # only the first k of each list count
    assert M.recall_at_k([1, 2, 3, 4], [4, 1], k=1) == 0.0


def test_recall_counts_ties_as_found():
    # true top-2 by score: ids 7 (0.9) and 8 (0.5); id 3 ties with 8 at 0.5, so finding 3 counts
    assert M.recall_at_k([7, 3], [7, 8], true_scores=[0.9, 0.5], found_scores=[0.9, 0.5], k=2) == 1.0
    assert M.recall_at_k([7, 3], [7, 8], true_scores=[0.9, 0.5], found_scores=[0.9, 0.4], k=2) == 0.5


def test_recall_tolerance_is_relative_to_the_score():
    # distances near 1,500 from a float32 kernel vs float64 recomputation differ by ~1e-3
    assert M.recall_at_k([1], [1], true_scores=[-1500.0], found_scores=[-1500.001], k=1) == 1.0
    assert M.recall_at_k([2], [1], true_scores=[-1500.0], found_scores=[-1501.0], k=1) == 0.0


def test_overlap_at_k():
    assert M.overlap_at_k(["a", "b", "c"], ["c", "d", "a"], k=3) == pytest.approx(2 / 3)
    assert M.overlap_at_k([], [], k=10) == 1.0
    assert M.overlap_at_k(["a"], ["a", "b"], k=10) == 0.5  # divided by the longer list (2), not k
    assert M.overlap_at_k(list("abcdefghijkl"), list("abcdefghijxy"), k=10) == 1.0


def test_percentiles_match_hand_computed_values():
    xs = [10, 20, 30, 40, 50]
    assert M.percentile(xs, 50) == 30
    assert M.percentile(xs, 0) == 10 and M.percentile(xs, 100) == 50
    assert M.percentile(xs, 90) == pytest.approx(46.0)  # rank 3.6: 40 + 0.6 * 10
    assert M.percentile([5, 1, 3], 25) == pytest.approx(2.0)
    assert math.isnan(M.percentile([], 50))
    rng = np.random.default_rng(0)
    v = rng.random(101).tolist()
    assert M.percentile(v, 99) == pytest.approx(float(np.percentile(v, 99)))


def test_qps_per_core():
    r = M.qps_per_core(1000, wall_s=2.0, cpu_s=3.0)
    assert r["qps"] == 500 and r["cores"] == 1.5 and r["qps_per_core"] == pytest.approx(1000 / 3)
    assert math.isnan(M.qps_per_core(10, 1.0, 0.0)["qps_per_core"])


def test_ndcg_and_recall_of_relevant():
    rel = {"a": 1, "b": 1, "c": 1}
    # hits at ranks 1 and 3: DCG = 1 + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3) + 1/2
    ideal = 1 + 1 / math.log2(3) + 0.5
    assert M.ndcg_at_k(["a", "x", "b"], rel, k=10) == pytest.approx(1.5 / ideal)
    assert M.ndcg_at_k(["a", "b", "c"], rel, k=10) == pytest.approx(1.0)
    assert M.ndcg_at_k(["x"], {}, k=10) == 0.0
    assert M.recall_of_relevant(["a", "x", "b"], rel, k=2) == pytest.approx(1 / 3)
    graded = {"a": 2, "b": 1}
    assert M.ndcg_at_k(["b", "a"], graded) == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))


def test_qps_at_recall_interpolates():
    pts = [{"recall": 0.8, "qps": 1000}, {"recall": 1.0, "qps": 200}]
    assert R.qps_at_recall(pts, 0.9) == pytest.approx(600)
    assert R.qps_at_recall(pts, 0.5) == 1000  # reached already at the fastest point
    assert R.qps_at_recall([{"recall": 0.7, "qps": 5}], 0.9) is None


def test_ground_truth_is_exact_and_cached(tmp_path):
    X, Q = D.sift_like(2000, 20, dim=16)
    for metric in ("l2", "ip", "cosine"):
        ids, scores = D.ground_truth(X, Q, 5, metric, tmp_path)
        Xd, Qd = X.astype(np.float64), Q.astype(np.float64)
        if metric == "l2":
            ref = -np.linalg.norm(Xd[None, :, :] - Qd[:, None, :], axis=2)
        elif metric == "ip":
            ref = Qd @ Xd.T
        else:
            ref = (Qd @ Xd.T) / np.linalg.norm(Qd, axis=1)[:, None] / np.linalg.norm(Xd, axis=1)[None, :]
        best = np.sort(ref, axis=1)[:, ::-1][:, :5]
        np.testing.assert_allclose(scores, best, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(np.take_along_axis(ref, ids.astype(np.int64), axis=1), best, rtol=1e-4, atol=1e-3)
    assert len(list(tmp_path.glob("gt-*.npz"))) == 3
    again, _ = D.ground_truth(X, Q, 5, "l2", tmp_path)  # from the cache
    np.testing.assert_array_equal(again, D.ground_truth(X, Q, 5, "l2", tmp_path)[0])


def test_fvecs_ivecs_roundtrip_and_damage(tmp_path):
    X = np.arange(12, dtype=np.float32).reshape(3, 4)
    raw = np.hstack([np.full((3, 1), 4, dtype=np.int32), X.view(np.int32)])
    raw.tofile(tmp_path / "a.fvecs")
    np.testing.assert_array_equal(D.read_fvecs(str(tmp_path / "a.fvecs")), X)
    np.hstack([np.full((2, 1), 2, dtype=np.int32), np.array([[1, 2], [3, 4]], dtype=np.int32)]).tofile(tmp_path / "g.ivecs")
    np.testing.assert_array_equal(D.read_ivecs(str(tmp_path / "g.ivecs")), [[1, 2], [3, 4]])
    raw.ravel()[:-1].tofile(tmp_path / "bad.fvecs")  # truncated
    with pytest.raises(ValueError, match="not an .fvecs"):
        D.read_fvecs(str(tmp_path / "bad.fvecs"))
    np.save(tmp_path / "x.npy", X.astype(np.float64))
    assert D.read_vectors(str(tmp_path / "x.npy")).dtype == np.float32


def test_idx_image_reader(tmp_path):
    import gzip
    pixels = np.arange(2 * 3 * 4, dtype=np.uint8)
    header = b"".join(int(x).to_bytes(4, "big") for x in (0x803, 2, 3, 4))
    with gzip.open(tmp_path / "imgs-idx3-ubyte.gz", "wb") as f:
        f.write(header + pixels.tobytes())
    np.testing.assert_array_equal(D.read_idx_images(str(tmp_path / "imgs-idx3-ubyte.gz")),
                                  pixels.reshape(2, 12).astype(np.float32))
    (tmp_path / "short").write_bytes(header + pixels.tobytes()[:-1])
    with pytest.raises(ValueError, match="header promises"):
        D.read_idx_images(str(tmp_path / "short"))
    real = D.fashion_mnist()
    if real is not None:  # the Debian package is installed here: the real files parse to their known shapes
        assert real[0].shape == (60000, 784) and real[1].shape == (10000, 784) and real[0].max() == 255


def test_beir_reader(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "hello"}\n{"_id": "d2", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "hello?"}\n{"_id": "q2", "text": "none"}\n')
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    rel = D.read_beir(str(tmp_path))
    assert rel.corpus == [{"id": "d1", "text": "T hello"}, {"id": "d2", "text": "x"}]
    assert rel.queries == {"q1": "hello?"} and rel.qrels == {"q1": {"d1": 1}}


def test_products_are_deterministic_and_shaped_like_the_benchmark(tmp_path, monkeypatch):
    monkeypatch.setenv("HS_CACHE", str(tmp_path))
    a, b = D.products(300, 20, dim=32), D.products(300, 20, dim=32)
    assert [d["title"] for d in a.docs] == [d["title"] for d in b.docs] and a.queries == b.queries
    d = a.docs[0]
    assert set(d) == {"id", "title", "description", "category", "price", "average_rating", "embedding"}
    assert all(len(q.split()) <= 8 for q in a.queries)
    np.testing.assert_allclose(np.linalg.norm(np.stack([x["embedding"] for x in a.docs]), axis=1), 1.0, rtol=1e-5)


def test_products_embed_with_wordllama_offline(tmp_path, monkeypatch):
    """The `[embeddings]` path: wordllama's 256-d static embeddings from its wheel, no download.
    Independent check by brute force: a query (the first 8 words of a title) finds its own
    product among the 5 nearest of 2,000."""
    pytest.importorskip("wordllama", reason="wordllama is in the [test] extra; not installed here")
    monkeypatch.setenv("HS_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p = D.products(2000, 40)
    assert p.embedder == "wordllama-256"
    E = np.stack([d["embedding"] for d in p.docs])
    assert E.shape == (2000, 256) and p.query_vectors.shape == (40, 256)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, rtol=1e-4)
    titles = [d["title"] for d in p.docs]
    source = [next(i for i, t in enumerate(titles) if " ".join(t.split()[:8]) == q) for q in p.queries]
    sims = p.query_vectors @ E.T
    ranks = [int((sims[j] > sims[j, s]).sum()) for j, s in enumerate(source)]
    assert np.mean(np.array(ranks) < 5) >= 0.9
    # cached per embedder: a second call reads the same vectors back
    np.testing.assert_array_equal(D.products(2000, 40).query_vectors, p.query_vectors)


def test_report_writes_json_markdown_and_plots(tmp_path):
    results = {"mode": "quick", "machine": R.machine_facts(), "skipped": ["x: not installed"],
               "ann_data": "tiny", "ann": [{"storage": "hnsw", "m": 16, "ef_construct": 100, "build_s": 0.1,
                                           "points": [{"ef": 10, "recall": 0.9, "qps": 1000.0, "p50_ms": 1, "p99_ms": 2},
                                                      {"ef": 20, "recall": 0.99, "qps": 500.0, "p50_ms": 2, "p99_ms": 3}]}],
               "ecommerce": [{"storage": "memory", "writes": {"feed": M.qps_per_core(10, 1, 1)},
                              "queries": {"lexical": [dict(M.qps_per_core(10, 1, 1), threads=1, mean_ms=1.0, p99_ms=2.0)]},
                              "ids": {"lexical": [["a", "b"]]}}]}
    R.add_overlaps(results["ecommerce"])
    assert results["ecommerce"][0]["overlap"] == {"lexical": 1.0}
    R.write(results, tmp_path)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["machine"]["cores"] and "ids" not in data["ecommerce"][0]
    md = (tmp_path / "report.md").read_text()
    assert "| hnsw | 16 | 100 | 0.1 | 20 | 0.990 | 500 |" in md and "x: not installed" in md
    for png in ("recall_vs_qps.png", "latency_vs_qps.png", "qps_per_core.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"


def test_the_harness_runs_end_to_end_on_a_tiny_size(tmp_path, monkeypatch):
    """`hybridsearch bench` on tiny data (memory + hnsw, no servers): every table, the JSON and the plots."""
    from hybridsearch.bench import cli
    monkeypatch.setenv("HS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HS_ES_URL", "http://127.0.0.1:1")  # never reachable: the remote rows are skipped
    monkeypatch.setenv("HS_OS_URL", "http://127.0.0.1:1")
    out = tmp_path / "out"
    assert cli.main(["bench", "--size", "tiny", "--out", str(out), "--storages", "memory,hnsw"]) == 0
    data = json.loads((out / "results.json").read_text())
    assert data["mode"] == "tiny" and {r["storage"] for r in data["six_tasks"]} == {"memory", "hnsw"}
    assert all("error" not in r for r in data["six_tasks"] + data["ann"] + data["ecommerce"]), data
    mem = next(r for r in data["six_tasks"] if r["storage"] == "memory")
    assert mem["recall_at_10"] == pytest.approx(1.0)  # memory is exact
    ann = next(r for r in data["ann"] if r["storage"] == "hnsw")
    assert [p["ef"] for p in ann["points"]] == [16, 64] and all(0 <= p["recall"] <= 1 for p in ann["points"])
    assert data["ecommerce"][0]["overlap"]["lexical"] == 1.0  # memory against itself
    assert {r["storage"] for r in data["relevance"]} >= {"memory"}
    for png in ("recall_vs_qps.png", "latency_vs_qps.png", "qps_per_core.png"):
        assert (out / png).exists()
    assert "## Six tasks" in (out / "report.md").read_text()


def test_storage_selection_says_why_a_row_cannot_run():
    from hybridsearch.bench.cli import select_storages
    engines = {"elasticsearch": ("http://127.0.0.1:9260", 1), "opensearch": (None, None)}
    present = {"hnswlib"}
    usable, skipped = select_storages(["memory", "hnswlib", "annlite", "elasticsearch", "opensearch"], engines,
                                      lambda m: m in present)
    assert usable == ["memory", "hnswlib"]
    assert skipped == ["annlite: not installed",
                       'elasticsearch: a node answers but its Python client (elasticsearch) is not installed: '
                       'pip install -e ".[elasticsearch]"',
                       "opensearch: no node answers (start one with scripts/searchnode.sh start os)"]
    present |= {"annlite", "elasticsearch"}
    assert select_storages(["annlite", "elasticsearch"], engines, lambda m: m in present) == (
        ["annlite", "elasticsearch"], [])
