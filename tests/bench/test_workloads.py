"""The adapters and workloads on tiny data: every compared library finds what exact search finds,
filters are honoured, and each workload returns the figures its script prints."""
import pytest

from hybridsearch.bench import corpora as C
from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import installed
from hybridsearch.bench.adapters.base import GraphConfig
from hybridsearch.bench.workloads import ann, exact, lexical, scan
from hybridsearch.bench.workloads.contention import contention
from hybridsearch.bench.workloads.relevance import relevance
from hybridsearch.bench.workloads.storage_tasks import storage_tasks

VECTOR_INDEXES = ["hnsw", "memory", "ours-raw", "ours-raw-int8"] + [n for n, m in ann.RAW_MODULES.items()
                                                                      if installed(m)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    X, Q = V.sift_like(3000, 20, dim=32)
    cache = tmp_path_factory.mktemp("cache")
    return X, Q, V.buckets(len(X)), V.ground_truth(X, Q, 10, "l2", cache)[0], cache


def test_every_vector_index_finds_the_neighbours_and_honours_filters(data, tmp_path):
    X, Q, bucket, gt, cache = data
    built, failed = ann.build_all(VECTOR_INDEXES, X, bucket, "l2", GraphConfig(16, 100, 2), str(tmp_path), ef=64)
    assert not failed and [a.name for a in built] == VECTOR_INDEXES
    assert all(a.build_s > 0 for a in built)
    assert next(a for a in built if a.name == "hnsw").graph_bytes > 0  # from da.stats()
    curves = ann.sweep(built, X, Q, gt, "l2", [64], passes=1)
    for name, points in curves.items():
        assert points[0]["recall"] >= (1.0 if name == "memory" else 0.9), (name, points)
        assert points[0]["qps"] > 0 and points[0]["p99_ms"] >= points[0]["p50_ms"]
    res = ann.filtered(built, X, Q, bucket, "l2", [10], ef=64, passes=1, cache=cache)[10]
    assert res["matches"] == int((bucket < 10).sum())
    variants = res["results"]
    assert {"ours-raw plain", "ours-raw two-hop", "hnsw"} <= set(variants)
    for v, r in variants.items():
        assert r["violations"] == 0 and r["recall"] >= 0.8, (v, r)
    assert variants["hnsw"]["plan"].split()[0] in ("exact", "filter-first", "graph")
    for a in built:
        a.close()


def test_storage_tasks_with_filtered_rows(data, tmp_path):
    X, Q, _, gt, cache = data
    row = storage_tasks("sqlite", X, Q, gt, "l2", {}, str(tmp_path), n_ops=50, selectivities=(10,), cache=cache)
    assert row["recall_at_10"] == pytest.approx(1.0) and row["create_s"] > 0
    for task in ("read", "update", "delete", "find_by_condition", "find_by_vector"):
        assert row[task]["qps"] > 0 and row[task]["ms"] > 0
    assert row["filtered"][10]["recall"] == pytest.approx(1.0)


def test_exact_against_numpy(monkeypatch):
    monkeypatch.setattr(exact, "BATCH", 40)
    monkeypatch.setattr(exact, "N_SINGLE", 5)
    r = exact.run(exact.Size.parse("3000x16n"), repeats=1)
    assert exact.Size.parse("3000x16n").label == "3000x16n" and r["n"] == 3000
    assert r["overlap_vs_numpy"]["single"] >= 0.99 and r["overlap_vs_numpy"]["batch"] >= 0.99
    assert set(r["metrics"]) == {"ip", "l2", "cosine"} and r["metrics"]["ip"]["single"]["ours"] > 0
    assert r["bandwidth"]["gbps"] > 0 and r["api"]["ids_equal"] >= 0.99


def test_scan_at_one_level_against_numpy():
    from hybridsearch.engine.exact import simd_level
    best = simd_level()
    try:
        r = scan.run("scalar", 4000, 24, queries=4, repeats=1)
    finally:
        scan.force_simd(best)
    assert r["level"] == "scalar" and r["bandwidth"]["gbps"] > 0
    assert set(r["workloads"]) == {"float32 ip", "float32 l2", "int8 ip"}
    for name, w in r["workloads"].items():
        # the int8 codes rank as their float products: ids agree with numpy's over the codes
        assert w["overlap_vs_numpy"] >= 0.99, name
        assert w["ours"]["gbps"] > 0 and 0 < w["ours"]["of_bandwidth"]
    assert r["workloads"]["int8 ip"]["bytes"] * 4 == r["workloads"]["float32 ip"]["bytes"]


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("HS_CACHE", str(tmp_path_factory.mktemp("products")))
    yield C.products(800, 30, dim=16, vocab=3000, title_words=12, query_words=(3, 8), embedder="projection")
    mp.undo()


def test_lexical_libraries_side_by_side(products):
    pytest.importorskip("bm25s")
    pytest.importorskip("tantivy")
    built, seconds, status = lexical.build(lexical.candidates(16, 1, hnsw=False), products)
    assert set(seconds) == {"ours", "ours-1thread", "ours-1f", "bm25s", "tantivy"}, status
    res = lexical.compare(built, products, nq=20, nwarm=5, repeats=1, status=status)
    assert {"ours", "ours-1f", "bm25s", "tantivy", "tantivy count=True", "tantivy-dismax"} <= set(res["search"])
    assert "ours-1thread" not in res["search"]  # an index-time row: its searches are ours
    # the same single field, the same analysis: ours and bm25s agree; best field agrees with dismax
    assert res["overlap"]["bm25s / ours-1f"] >= 0.8
    assert res["overlap"]["ours / tantivy-dismax"] >= 0.8
    assert res["bm25s_batched"]["bm25s batched, 1 thread"]["qps"] > 0
    assert "memory: text + vector, rrf" in res["hybrid"]


def test_relevance_and_contention(products, tmp_path):
    rel = C.Relevance([{"id": d["id"], "text": d["title"]} for d in products.docs[:200]],
                      {"q1": products.docs[5]["title"]}, {"q1": {products.docs[5]["id"]: 1}})
    r = relevance("memory", rel, {}, str(tmp_path))
    assert r["ndcg@10"] == pytest.approx(1.0) and r["recall@100"] == 1.0 and r["queries"] == 1
    c = contention("memory", products, str(tmp_path), readers=1, writers=1, seconds=0.2, warmup=0.05, rounds=2)
    assert c["reads_alone"] > 0 and c["reads_with_writers"] > 0 and c["writes"] > 0 and 0 < c["ratio"]


def test_filtered_sweep_reports_every_selectivity_with_complete_matching_hits(tmp_path):
    """bench_filtered.py's workload in quick form: every row has both recalls, a ratio, ours'
    plan, and ours never returns a short or non-matching result."""
    from hybridsearch.bench.workloads import filtered
    names = ["hnsw"] + (["hnswlib-raw"] if installed("hnswlib") else [])
    r = filtered.run(3000, 20, GraphConfig(16, 100, 2), 64, pcts=(0.5, 10, 50), passes=1, nwarm=5,
                     tmp=str(tmp_path), names=names)
    assert [row["pct"] for row in r["rows"]] == [0.5, 10, 50] and not r["failed"]
    for row in r["rows"]:
        ours = row["ours"]
        assert ours["violations"] == 0 and ours["short"] == 0 and ours["recall"] >= 0.9, row
        assert row["plan"].split()[0] in ("exact", "graph", "filter_first")
        if installed("hnswlib"):
            assert row["ratio"] > 0
    filtered.plot(r, tmp_path / "filtered.png")
    assert (tmp_path / "filtered.png").stat().st_size > 0
