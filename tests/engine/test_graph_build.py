"""Quality of the hnsw graph's build and of its relink of rewritten nodes (kernels/hs_hnsw.c):
recall@10 against numpy brute force after a build, after rewriting 30% of the nodes with vectors
that moved a little (re-linked by the narrow search from their old neighbours) or far (inserted
anew), compared with a graph built from scratch on the final vectors and with a graph that
re-links every rewritten node by a full search; rewritten nodes stay reachable; 1 and 2 build
threads give graphs of equal recall.

Why below the public API: the relink path taken and the build thread count are the graph's;
DocumentArray reaches them only through whole collections, where a weaker graph hides behind
exact re-scoring and the planner."""
import numpy as np
import pytest

from hybridsearch.engine.graph import HnswGraph  # internal: the graph itself is the unit under test
from tests.models import clustered, exact_scores

N, D, M, EFC, K = 3000, 32, 8, 64, 10
EFS = (16, 32, 64)


def truth(X, Q, metric):
    return [set(np.argsort(-exact_scores(X, q, metric), kind="stable")[:K].tolist()) for q in Q]


def recall(g, X, Q, ref, ef):
    ids = g.search(X, Q, K, ef)[1]
    return float(np.mean([len(set(r.tolist()) & t) / K for r, t in zip(ids, ref)]))


def unit(A):
    return (A / np.linalg.norm(A, axis=1, keepdims=True)).astype(np.float32)


def data(metric, seed=0):
    X = clustered(N, d=D, centres=40, seed=seed)
    Q = clustered(200, d=D, centres=40, seed=seed)[:200]  # same centres (same seed), other draws
    Q = Q + 0.05 * np.random.default_rng(seed + 1).standard_normal(Q.shape).astype(np.float32)
    if metric == "cosine":
        Q = unit(Q)
    return np.ascontiguousarray(X), np.ascontiguousarray(Q.astype(np.float32))


def build(X, metric, quant="int8", threads=1):
    g = HnswGraph(D, metric, M, EFC, 0x5EED, quant)
    g.add(X, np.arange(len(X), dtype=np.int64), threads)
    return g


def rewrite(g, X, ids, Y, batch=300):
    """X[ids] = Y, fed to the graph as a storage does (the block written first, then add)."""
    X[ids] = Y
    for a in range(0, len(ids), batch):
        g.add(X, np.sort(ids[a:a + batch]).astype(np.int64), 1)


def moved(X, rng, how, step=0.15):
    ids = rng.choice(N, int(0.3 * N), replace=False)
    if how == "near":  # inside most points' nearest-neighbour distance (spread 0.35 per axis)
        Y = X[ids] + step * rng.standard_normal((len(ids), D)).astype(np.float32)
    else:  # another point of the data: most land in another cluster
        Y = X[rng.permutation(ids)] + 0.0
    return ids, Y.astype(np.float32)


@pytest.mark.parametrize("quant", ["int8", "none"])
def test_recall_after_build(quant):
    """A fresh graph finds >= 0.9 of the exact top-10 at ef 32 and >= 0.97 at ef 64."""
    X, Q = data("l2")
    ref = truth(X, Q, "l2")
    g = build(X, "l2", quant)
    assert recall(g, X, Q, ref, 32) >= 0.9
    assert recall(g, X, Q, ref, 64) >= 0.97


def rewritten(metric, how):
    """(int8 graph, full-search-relink float graph, X, Q, exact top-10) after rewriting 30%."""
    X0, Q = data(metric)
    ids, Y = moved(X0, np.random.default_rng(3), how)
    X, Xf = X0.copy(), X0.copy()
    g, full = build(X, metric), build(Xf, metric, "none")
    rewrite(g, X, ids, Y)
    rewrite(full, Xf, ids, Y)
    assert np.array_equal(X, Xf)
    return g, full, X, Q, truth(X, Q, metric)


@pytest.mark.parametrize("metric", ["l2", "cosine", "ip"])
@pytest.mark.parametrize("how", ["near", "far"])
def test_recall_after_rewriting_30_percent(metric, how):
    """After rewriting 30% of the nodes, the graph's recall at every ef is within 0.02 of the
    full-search relink (a float graph: it holds no old codes, so every rewritten node is re-linked
    with the whole ef_construct beam), and >= 0.9 at ef 32."""
    g, full, X, Q, ref = rewritten(metric, how)
    for ef in EFS:
        assert recall(g, X, Q, ref, ef) >= recall(full, X, Q, ref, ef) - 0.02, ef
    assert recall(g, X, Q, ref, 32) >= 0.9


FAR_GAP = pytest.mark.xfail(strict=True, reason="known: after far moves under cosine the graph stays "
                            "0.02-0.05 below a fresh build (the moved nodes' old in-links are kept); "
                            "docs/benchmarks.md, HNSW build and re-feed speed")


# The relink that closed the l2 / ip gap after far moves broke the FDE graph's replay after kill -9
# (tests/contract/test_fde_crash.py: walked scores far below the exact ones) and was taken out
# at the end of issue 33's first session: until it is back, the far cases stay below a fresh build.
FAR_RELINK_OUT = pytest.mark.xfail(strict=True, reason="known: the far-move relink of issue 33 is reverted "
                                   "(it broke the FDE graph's replay); docs/benchmarks.md, HNSW build and re-feed speed")


@pytest.mark.parametrize("metric,how", [("l2", "near"), ("cosine", "near"), ("ip", "near"),
                                        pytest.param("l2", "far", marks=FAR_RELINK_OUT),
                                        pytest.param("ip", "far", marks=FAR_RELINK_OUT),
                                        pytest.param("cosine", "far", marks=FAR_GAP)])
def test_rewritten_graph_as_good_as_a_fresh_build(metric, how):
    """After rewriting 30% of the nodes, recall at every ef is within 0.02 of a graph built from
    scratch on the final vectors."""
    g, _, X, Q, ref = rewritten(metric, how)
    fresh = build(X.copy(), metric)
    for ef in EFS:
        assert recall(g, X, Q, ref, ef) >= recall(fresh, X, Q, ref, ef) - 0.02, ef


@pytest.mark.parametrize("how", ["near", pytest.param("far", marks=FAR_RELINK_OUT)])
def test_rewritten_nodes_are_reachable(how):
    """A search for a rewritten node's own new vector (k=1, ef 64) finds it, for >= 99.8% of them
    and at least as often as on the full-search relink (within 0.2%)."""
    X, _ = data("l2")
    ids, Y = moved(X, np.random.default_rng(5), how)
    Xf = X.copy()
    g, full = build(X, "l2"), build(Xf, "l2", "none")
    rewrite(g, X, ids, Y)
    rewrite(full, Xf, ids, Y)
    assert g.size == N
    reached = np.mean(g.search(X, np.ascontiguousarray(X[ids]), 1, 64)[1][:, 0] == ids)
    assert reached >= np.mean(full.search(Xf, np.ascontiguousarray(Xf[ids]), 1, 64)[1][:, 0] == ids) - 0.002
    assert reached >= 0.998


def test_rewritten_nodes_link_to_their_new_neighbours():
    """A rewritten node moved by most of its nearest-neighbour distance (still the near relink for
    ~97% of them) has in its level-0 list at least one of its 3 exact nearest (new vectors) for >=
    95% of the rewritten nodes: the relink follows the new vector, not the old list."""
    X, _ = data("l2")
    ids, Y = moved(X, np.random.default_rng(7), "near", step=0.3)
    g = build(X, "l2")
    rewrite(g, X, ids, Y)
    hits = 0
    for i in ids:
        d = ((X - X[i]) ** 2).sum(1)
        d[i] = np.inf
        hits += bool(set(np.argsort(d)[:3].tolist()) & set(g.links(int(i), 0).tolist()))
    assert hits >= 0.95 * len(ids)


@pytest.mark.parametrize("quant", ["int8", "none"])
def test_threads_1_and_2_give_equal_recall(quant):
    """A batch of N (>= 1024: the kernel runs it on the threads asked) built on 1 and on 2 threads:
    recall@10 within 0.02 at every ef, both >= 0.9 at ef 32."""
    X, Q = data("l2", seed=4)
    ref = truth(X, Q, "l2")
    one, two = build(X, "l2", quant, 1), build(X, "l2", quant, 2)
    assert one.size == two.size == N
    for ef in EFS:
        assert abs(recall(one, X, Q, ref, ef) - recall(two, X, Q, ref, ef)) <= 0.02, ef
    assert min(recall(one, X, Q, ref, 32), recall(two, X, Q, ref, 32)) >= 0.9
