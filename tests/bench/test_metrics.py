"""The harness's numbers against hand-computed values: recall (tie-aware, batched), overlap,
percentiles, QPS per core, nDCG, QPS at a recall level, and the timing loops on known work."""
import math
import time

import numpy as np
import pytest

from hybridsearch.bench import metrics as M
from hybridsearch.bench import timing as T
from hybridsearch.bench.concurrency import concurrent, readers_and_writers


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


def test_exact_scores_by_hand():
    X = np.array([[0, 0], [3, 4], [1, 0]], dtype=np.float32)
    Q = np.array([[0, 0], [1, 0]], dtype=np.float32)
    ids = np.array([[1, -1], [2, 1]])
    np.testing.assert_allclose(M.exact_scores(X, Q, ids, "l2"), [[-5.0, -np.inf], [0.0, -np.sqrt(4 + 16)]])
    np.testing.assert_allclose(M.exact_scores(X, Q, ids, "ip"), [[0.0, -np.inf], [1.0, 3.0]])
    np.testing.assert_allclose(M.exact_scores(X, Q[1:], np.array([[1, 2]]), "cosine"), [[0.6, 1.0]])


def test_mean_recall_by_hand():
    # points on a line; query at 0: true top-2 are rows 0 (distance 0) and 1 (distance 1)
    X = np.array([[0.0], [1.0], [-1.0], [5.0]], dtype=np.float32)
    Q = np.array([[0.0], [0.0]], dtype=np.float32)
    gt = np.array([[0, 1], [0, 1]])
    # query 1 found row 2 (distance 1: a tie with row 1, counts) and row 0 twice (counts once)
    assert M.mean_recall(X, Q, [[0, 1], [2, 0, 0]], gt, "l2", k=2)[0] == pytest.approx(1.0)
    assert M.mean_recall(X, Q, [[0, 3], [0, 0]], gt, "l2", k=2)[0] == pytest.approx(0.5)
    # a filter that allows rows 0 and 3 only: row 1 is a violation and does not count
    allowed = np.array([True, False, False, True])
    recall, bad = M.mean_recall(X, Q, [[0, 1], [0, 3]], np.array([[0, 3], [0, 3]]), "l2", k=2, allowed=allowed)
    assert (recall, bad) == (pytest.approx(0.75), 1)
    # fewer matches than k (-1 padded ground truth): judged on those there are
    assert M.mean_recall(X, Q[:1], [[0]], np.array([[0, -1]]), "l2", k=2)[0] == 1.0


def test_overlap_at_k():
    assert M.overlap_at_k(["a", "b", "c"], ["c", "d", "a"], k=3) == pytest.approx(2 / 3)
    assert M.overlap_at_k([], [], k=10) == 1.0
    assert M.overlap_at_k(["a"], ["a", "b"], k=10) == 0.5  # divided by the longer list (2), not k
    assert M.overlap_at_k(list("abcdefghijkl"), list("abcdefghijxy"), k=10) == 1.0
    assert M.mean_overlap([["a"], ["b", "c"]], [["a"], ["b", "x"]], k=10) == pytest.approx(0.75)


def test_percentiles_match_hand_computed_values():
    xs = [10, 20, 30, 40, 50]
    assert M.percentile(xs, 50) == 30
    assert M.percentile(xs, 0) == 10 and M.percentile(xs, 100) == 50
    assert M.percentile(xs, 90) == pytest.approx(46.0)  # rank 3.6: 40 + 0.6 * 10
    assert M.percentile([5, 1, 3], 25) == pytest.approx(2.0)
    assert math.isnan(M.percentile([], 50))
    v = np.random.default_rng(0).random(101).tolist()
    assert M.percentile(v, 99) == pytest.approx(float(np.percentile(v, 99)))
    assert M.median([3, 1, 2]) == 2 and math.isnan(M.median([]))


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


def test_qps_at_recall_interpolates_in_log_qps():
    pts = [{"ef": 10, "recall": 0.8, "qps": 1000}, {"ef": 40, "recall": 1.0, "qps": 200}]
    # halfway in recall: exp((log 1000 + log 200) / 2) = sqrt(200,000)
    assert M.qps_at_recall(pts, 0.9)[0] == pytest.approx(math.sqrt(200_000))
    assert M.qps_at_recall(pts, 0.5) == (1000, "ef=10 (already 0.800)")  # the fastest point reaches it
    assert M.qps_at_recall([{"ef": 1, "recall": 0.7, "qps": 5}], 0.9) == (None, "never reached (max 0.700)")


def test_round_robin_times_every_function_and_isolates_a_broken_one():
    calls = []

    def slow(x):
        calls.append(("slow", x))
        time.sleep(0.002)
        return x * 2

    def broken(x):
        raise ValueError("nope")

    r = T.round_robin({"slow": slow, "broken": broken, "fast": lambda x: x}, [1, 2, 3], warmup=[0], passes=2,
                      keep=True)
    assert r["broken"] == {"error": "ValueError: nope"}
    assert r["slow"]["out"] == [2, 4, 6] and r["fast"]["out"] == [1, 2, 3]
    assert calls == [("slow", 0)] + [("slow", x) for x in (1, 2, 3)] * 2  # warm-up once, then 2 passes
    # sleep(0.002) bounds each call from below only (a loaded machine stretches it): >= 2 ms per call
    assert r["slow"]["qps"] <= 500 and r["fast"]["qps"] > r["slow"]["qps"]
    assert r["slow"]["p50_ms"] >= 2.0 and r["slow"]["p99_ms"] >= r["slow"]["p50_ms"]
    with pytest.raises(RuntimeError, match="nope"):
        T.timed(broken, [1])


def test_cpu_clock_and_median_seconds():
    with T.CpuClock() as c:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.05:  # busy: CPU time follows wall time
            pass
    assert c.wall >= 0.05 and 0 < c.cpu <= c.wall + 0.01 and c.used == c.cpu  # a shared machine may lend less
    assert T.median_seconds(lambda: time.sleep(0.01), 3) == pytest.approx(0.01, abs=0.008)
    assert T.process_cpu_seconds(None) == 0.0 and T.settle(None) == (0.0, 0.0)
    assert T.rss_bytes() > 0


def test_concurrent_runs_every_item_once_on_every_thread_count():
    seen = []
    r = concurrent(seen.append, list(range(40)), threads=4)
    # the warm-up runs the first tenth once more
    assert sorted(seen) == sorted(list(range(40)) + [0, 1, 2, 3])
    assert r["threads"] == 4 and r["qps"] > 0 and r["p99_ms"] >= r["p50_ms"] >= 0


def test_readers_and_writers_count_inside_the_window():
    reads, writes = [], []
    lat, n_writes = readers_and_writers(lambda i, k: reads.append(i), lambda i, k: (writes.append(k), time.sleep(0.001)),
                                        readers=2, writers=1, seconds=0.3)
    assert 0 < len(lat) <= len(reads) and set(reads) <= {0, 1}
    assert 0 < n_writes <= len(writes)
    assert readers_and_writers(lambda i, k: None, lambda i, k: None, readers=0, writers=0, seconds=0.01)[0].size == 0
    with pytest.raises(ZeroDivisionError):
        readers_and_writers(lambda i, k: 1 / 0, lambda i, k: None, readers=1, writers=0, seconds=0.05)
