"""The HNSW graph walking RaBitQ codes (quantization "rabitq1" / "rabitq4"), against numpy.

The walk ranks by the codes' estimate and the candidates it keeps are rescored on float32, so:
asked to keep and rescore every node (ef >= n, rescore eps0 = inf) a search returns numpy's exact
top-k with exact scores; with the default bound it returns exact scores for the rows it returns,
and a recall that a 4-bit walk keeps high; the exact scan on the codes equals numpy's top-k. The
codes and centroid survive export/attach, growth after attach and the centroid's re-training as
the graph doubles; a damaged snapshot is refused."""
import math

import numpy as np
import pytest

from hybridsearch.engine.graph import QUANTIZATIONS, HnswGraph, quantization_of

RQ = ("rabitq1", "rabitq4")
METRICS = ("l2", "ip", "cosine")


def data(n, d, seed=0, clusters=8):
    rng = np.random.default_rng(seed)
    C = rng.normal(size=(clusters, d)).astype(np.float32) * 2
    X = (C[rng.integers(0, clusters, n)] + rng.normal(size=(n, d))).astype(np.float32)
    Q = (C[rng.integers(0, clusters, 20)] + rng.normal(size=(20, d))).astype(np.float32)
    return np.ascontiguousarray(X), np.ascontiguousarray(Q)


def built(X, metric, m, ef_construct, seed, quant, threads=2):
    """A graph of every row of X."""
    g = HnswGraph(X.shape[1], metric, m, ef_construct, seed, quant)
    g.add(X, np.arange(len(X), dtype=np.int64), threads)
    return g


def exact(X, Q, k, metric, rows=None):
    """numpy's top-k: (scores, ids) as the graph reports them (higher is better)."""
    rows = np.arange(len(X)) if rows is None else np.asarray(rows)
    A = X[rows].astype(np.float64)
    Qd = Q.astype(np.float64)
    if metric == "l2":
        S = -np.sqrt(((Qd[:, None, :] - A[None]) ** 2).sum(-1))
    elif metric == "ip":
        S = Qd @ A.T
    else:
        S = (Qd / np.linalg.norm(Qd, axis=1, keepdims=True)) @ (A / np.linalg.norm(A, axis=1, keepdims=True)).T
    order = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(S, order, 1), rows[order]


def queries(Q, metric):
    return np.ascontiguousarray(Q / np.linalg.norm(Q, axis=1, keepdims=True)) if metric == "cosine" else Q


def same_topk(ids, scores, want_ids, want_scores):
    """Equal top-k up to float32 ties: the scores agree, and the ids wherever the scores differ."""
    np.testing.assert_allclose(scores, want_scores, rtol=1e-4, atol=1e-4)
    for got, want, s in zip(ids, want_ids, want_scores):
        distinct = np.r_[True, np.abs(np.diff(s)) > 1e-4] & np.r_[np.abs(np.diff(s)) > 1e-4, True]
        assert set(got[distinct]) == set(want[distinct]) or set(got) == set(want)


@pytest.mark.parametrize("quant", RQ)
@pytest.mark.parametrize("metric", METRICS)
def test_rescoring_every_candidate_of_a_full_walk_gives_the_exact_top_k(quant, metric):
    X, Q = data(400, 24, seed=1)
    g = built(X, metric, 8, 64, 7, quant, 2)
    g.set_rescore(math.inf)
    q = queries(Q, metric)
    scores, ids = g.search(X, q, 10, len(X))
    want_s, want_i = exact(X, Q, 10, metric)
    same_topk(ids, scores, want_i, want_s)


@pytest.mark.parametrize("quant", RQ)
@pytest.mark.parametrize("metric", METRICS)
def test_the_default_bound_returns_exact_scores_and_a_4bit_walk_keeps_recall(quant, metric):
    X, Q = data(3000, 32, seed=2)
    g = built(X, metric, 12, 100, 3, quant, 2)
    q = queries(Q, metric)
    scores, ids = g.search(X, q, 10, 120)
    assert (ids >= 0).all()
    # every score returned is the float32 row's own (rescored), whatever the walk found
    for row_scores, row_ids, qi in zip(scores, ids, Q):
        all_s, all_i = exact(X, qi[None], len(X), metric)
        full = dict(zip(all_i[0].tolist(), all_s[0].tolist()))
        np.testing.assert_allclose(row_scores, [full[i] for i in row_ids], rtol=1e-4, atol=1e-4)
        assert (np.diff(row_scores) <= 1e-6).all()  # best first
    _, want_i = exact(X, Q, 10, metric)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, want_i)])
    assert recall >= (0.9 if quant == "rabitq4" else 0.5), recall


@pytest.mark.parametrize("quant", RQ)
@pytest.mark.parametrize("metric", METRICS)
def test_the_exact_scan_on_the_codes_equals_numpy_with_and_without_a_filter(quant, metric):
    X, Q = data(700, 20, seed=3)
    g = built(X, metric, 8, 40, 3, quant, 1)
    q = queries(Q, metric)
    scores, ids = g.scan(X, q, 7)
    want_s, want_i = exact(X, Q, 7, metric)
    same_topk(ids, scores, want_i, want_s)
    allowed = np.flatnonzero(np.arange(len(X)) % 3 == 1)
    mask = np.zeros(len(X) + (-len(X)) % 64, dtype=bool)
    mask[allowed] = True
    bits = np.packbits(mask, bitorder="little").view(np.uint64)
    scores, ids = g.scan(X, q, 7, bits)
    want_s, want_i = exact(X, Q, 7, metric, allowed)
    same_topk(ids, scores, want_i, want_s)


@pytest.mark.parametrize("quant", RQ)
def test_batches_that_retrain_the_centroid_keep_every_code_consistent(quant):
    """The centroid is re-made (and every code with it) as the graph doubles: a graph fed one row,
    then 10, then 100, then the rest searches as exactly as one fed at once."""
    X, Q = data(900, 16, seed=4)
    g = HnswGraph(16, "l2", 8, 64, 5, quant)
    for lo, hi in ((0, 1), (1, 11), (11, 111), (111, 900)):
        g.add(X, np.arange(lo, hi, dtype=np.int64), 2)
    g.set_rescore(math.inf)
    scores, ids = g.search(X, Q, 5, 900)
    same_topk(ids, scores, exact(X, Q, 5, "l2")[1], exact(X, Q, 5, "l2")[0])
    scores, ids = g.scan(X, Q, 5)
    same_topk(ids, scores, exact(X, Q, 5, "l2")[1], exact(X, Q, 5, "l2")[0])


@pytest.mark.parametrize("quant", RQ)
def test_removed_and_rewritten_nodes(quant):
    X, Q = data(600, 16, seed=5)
    # l2: after far rewrites an ip graph may leave a node unreachable by any walk, whatever it
    # reads (tests/engine/test_graph_build.py), which is not what this test is about
    g = built(X, "l2", 8, 64, 5, quant, 2)
    gone = np.arange(0, 600, 4, dtype=np.int64)
    g.remove(X, gone, 2)
    X2 = X.copy()
    moved = np.arange(1, 600, 4, dtype=np.int64)
    X2[moved] = data(len(moved), 16, seed=6)[0]
    g.add(X2, moved, 2)  # rewritten: new vectors, new codes
    g.set_rescore(math.inf)
    live = np.setdiff1d(np.arange(600), gone)
    scores, ids = g.search(X2, Q, 8, 600)
    assert not set(ids.ravel()) & set(gone.tolist())
    want_s, want_i = exact(X2, Q, 8, "l2", live)
    same_topk(ids, scores, want_i, want_s)


@pytest.mark.parametrize("quant", RQ)
def test_export_attach_keeps_the_codes_and_grows_after(quant):
    X, Q = data(500, 12, seed=7)
    g = HnswGraph(12, "cosine", 8, 64, 5, quant)
    g.add(X[:300], np.arange(300, dtype=np.int64), 2)
    meta, arrays = g.export()
    assert quantization_of(meta) == quant
    copies = {k: np.array(v) for k, v in arrays.items()}
    a = HnswGraph.attach(meta, copies, 12, "cosine", 8, 64, quant)
    q = queries(Q, "cosine")
    np.testing.assert_array_equal(a.search(X, q, 6, 50)[1], g.search(X, q, 6, 50)[1])
    a.add(X, np.arange(300, 500, dtype=np.int64), 2)  # the first growth copies the borrowed arrays
    a.set_rescore(math.inf)
    scores, ids = a.search(X, q, 6, 500)
    same_topk(ids, scores, exact(X, Q, 6, "cosine")[1], exact(X, Q, 6, "cosine")[0])


def test_a_damaged_snapshot_of_codes_is_refused():
    X, _ = data(200, 8, seed=8)
    g = built(X, "l2", 8, 32, 5, "rabitq1", 1)
    meta, arrays = g.export()

    def attach(m, arr, quant="rabitq1"):
        return HnswGraph.attach(m, {k: np.array(v) for k, v in arr.items()}, 8, "l2", 8, 32, quant)

    attach(meta, arrays)  # sound
    with pytest.raises(ValueError, match="rq_codes"):
        attach(meta, {**arrays, "rq_codes": np.zeros((200, 3), np.uint8)})
    with pytest.raises(ValueError, match="rq_centroid"):
        attach(meta, {k: v for k, v in arrays.items() if k != "rq_centroid"})
    with pytest.raises(ValueError, match="rq_trained"):
        attach({k: v for k, v in meta.items() if k != "rq_trained"}, arrays)
    # codes of another rotation or layout would pass every other check and rank at random
    assert meta["rq_format"] == 1
    attach({k: v for k, v in meta.items() if k != "rq_format"}, arrays)  # written before the field: format 1
    for other in (2, 0, "1", None):
        with pytest.raises(ValueError, match="format"):
            attach({**meta, "rq_format": other}, arrays)
    bad = np.array(arrays["rq_centroid"])
    bad[0] = np.nan
    with pytest.raises(ValueError, match="not a valid HNSW graph"):
        attach(meta, {**arrays, "rq_centroid": bad})
    with pytest.raises(ValueError, match="not a valid HNSW graph"):
        attach({**meta, "rq_trained": 0}, arrays)
    codes = np.array(arrays["rq_codes"])
    codes[3, codes.shape[1] - 8:codes.shape[1] - 4] = np.frombuffer(np.float32(5).tobytes(), np.uint8)
    with pytest.raises(ValueError, match="not a valid HNSW graph"):  # row 3's centroid number: none such
        attach(meta, {**arrays, "rq_codes": codes})
    with pytest.raises(ValueError, match="rq_centroid"):
        attach(meta, {**arrays, "rq_centroid": np.zeros((65, 8), np.float32)})
    with pytest.raises(ValueError):  # saved as 1-bit, opened as 4-bit: the code rows differ
        attach(meta, arrays, "rabitq4")
    assert [quantization_of({"quant": i}) for i in range(len(QUANTIZATIONS))] == list(QUANTIZATIONS)
    assert quantization_of({"quant": 9}) is None and quantization_of({"quant": True}) is None


def test_set_rescore_refuses_a_negative_bound():
    g = HnswGraph(8, "l2", 8, 32, 5, "rabitq4")
    with pytest.raises(ValueError):
        g.set_rescore(-1.0)
    with pytest.raises(ValueError):
        g.set_rescore(float("nan"))


@pytest.mark.parametrize("quant", RQ)
def test_vectors_whose_estimates_overflow_are_rescored_not_dropped(quant):
    """Rows of norm 1e20 make the l2 estimate and its bound inf (inf - inf: NaN): such rows are in
    doubt and rescored, never skipped or written past a buffer (a review found both)."""
    X, Q = data(200, 16, seed=9)
    X[50:] *= np.float32(1e20)
    g = built(X, "l2", 8, 50, 1, quant, 1)
    scores, ids = g.scan(X, Q[:3], 5)
    want_s, want_i = exact(X[:50], Q[:3], 5, "l2")
    np.testing.assert_array_equal(np.sort(ids, 1), np.sort(want_i, 1))


def test_a_cosine_walk_rescores_as_far_for_a_query_of_any_length():
    """The codes see the unit query; the rescoring's stop compares them with float keys of the
    query as given: the same recall for q and 8 q."""
    X, Q = data(3000, 32, seed=10)
    g = built(X, "cosine", 8, 64, 3, "rabitq1", 2)
    unit = queries(Q, "cosine")
    _, a = g.search(X, unit, 10, 100)
    _, b = g.search(X, np.ascontiguousarray(unit * 8), 10, 100)
    np.testing.assert_array_equal(a, b)


def test_a_snapshot_whose_factors_are_not_finite_is_refused():
    X, _ = data(300, 8, seed=11)
    g = built(X, "l2", 8, 32, 5, "rabitq4", 1)
    meta, arrays = g.export()
    codes = np.array(arrays["rq_codes"])
    cb = codes.shape[1] - 24
    codes[7, cb + 4:cb + 8] = np.frombuffer(np.float32(np.nan).tobytes(), np.uint8)
    with pytest.raises(ValueError, match="not a valid HNSW graph"):
        HnswGraph.attach(meta, {**{k: np.array(v) for k, v in arrays.items()}, "rq_codes": codes},
                         8, "l2", 8, 32, "rabitq4")


def test_an_emptied_graph_attached_without_training_scans_and_grows():
    X, Q = data(120, 8, seed=12)
    g = HnswGraph(8, "l2", 8, 32, 5, "rabitq1")
    g.add(X[:50], np.arange(50, dtype=np.int64), 1)
    g.remove(X, np.arange(50, dtype=np.int64), 1)
    g.repair(X, 1)
    meta, arrays = g.export()
    assert meta["count"] == 0 and meta["n"] == 50
    a = HnswGraph.attach({**meta, "rq_trained": 0}, {k: np.array(v) for k, v in arrays.items()}, 8, "l2", 8, 32,
                         "rabitq1")
    assert a.scan(X, Q[:2], 3)[1].tolist() == [[-1] * 3] * 2
    a.add(X, np.arange(50, 120, dtype=np.int64), 1)  # trains then
    a.set_rescore(math.inf)
    scores, ids = a.search(X, Q, 4, 120)
    same_topk(ids, scores, exact(X, Q, 4, "l2", np.arange(50, 120))[1], exact(X, Q, 4, "l2", np.arange(50, 120))[0])


def test_nbytes_counts_the_rows_the_centroids_and_their_rotations():
    """stats()' graph bytes include the context a RaBitQ walk keeps beside the rows: K centroids
    rotated in float64 (and the rotation's tables), not only the rows and the centroids: the
    bytes beyond every array the graph exports are at least the K x dp doubles."""
    n, d, m = 70000, 128, 8
    X, _ = data(n, d, seed=3)
    g = HnswGraph(d, "l2", m, 16, 5, "rabitq4")
    g.reserve(n)  # capacity = n exactly: the per-node arrays are n rows
    g.add(X, np.arange(n, dtype=np.int64), 2)
    meta, arrays = g.export()
    k = arrays["rq_centroid"].shape[0]
    assert k == 64 and meta["n"] == n
    exported = (n * ((2 * m + 1) * 4 + 1 + 1 + 8)  # links0, level, dead flag, upper pointer
                + arrays["upper"].nbytes + arrays["rq_codes"].nbytes + 64 * d * 4)
    assert g.nbytes - exported >= k * d * 8


@pytest.mark.parametrize("quant", ("rabitq1", "rabitq4", "int8"))
@pytest.mark.parametrize("metric", ("l2", "cosine"))
def test_codes_made_on_two_threads_equal_codes_made_on_one(quant, metric):
    """Batches of 1,024 rows or more have their codes (and cosine norms) made in parallel: every
    code, factor and norm equals those of the same batches fed on one thread - a new batch, one
    that retrains the centroids, and one that rewrites existing rows."""
    X, _ = data(6000, 24, seed=9)
    X2 = X.copy()
    moved = np.arange(0, 6000, 3, dtype=np.int64)
    X2[moved] = data(len(moved), 24, seed=10)[0]
    arrays = []
    for threads in (1, 2):
        g = HnswGraph(24, metric, 8, 32, 5, quant)
        g.add(X, np.arange(0, 1500, dtype=np.int64), threads)
        g.add(X, np.arange(1500, 6000, dtype=np.int64), threads)  # doubles the rows: retrains
        g.add(X2, moved, threads)
        arrays.append(g.export()[1])
    keys = {"rq_codes", "rq_centroid", "inv"} if quant != "int8" else {"codes", "cscale", "csq", "inv"}
    for key in keys & set(arrays[0]):
        np.testing.assert_array_equal(arrays[0][key], arrays[1][key], err_msg=key)
    assert "inv" in arrays[0] or metric != "cosine"
