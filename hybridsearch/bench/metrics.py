"""The numbers a benchmark reports, as plain functions (unit-tested against hand-computed values)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hybridsearch.storages.base import exact_scores as score_rows


def recall_at_k(found: Sequence, true_ids: Sequence, true_scores: Sequence | None = None, k: int = 10,
                found_scores: Sequence | None = None, tol: float = 1e-5) -> float:
    """Share of the true top-k that was found. With scores, ties count: a found hit whose true
    score is at least the k-th true score (minus tol, relative to its size: ground truth from a
    float32 kernel and scores recomputed in float64 differ in the last digits) is as good as any
    of the tied ones."""
    true_ids = list(true_ids)[:k]
    if not true_ids:
        return 1.0
    found = list(found)[:k]
    if true_scores is None or found_scores is None:
        return len(set(found) & set(true_ids)) / len(true_ids)
    kth = float(sorted(true_scores, reverse=True)[min(k, len(true_scores)) - 1])
    good = sum(1 for s in list(found_scores)[:k] if s >= kth - tol * max(1.0, abs(kth)))
    return min(good, len(true_ids)) / len(true_ids)


def overlap_at_k(a: Sequence, b: Sequence, k: int = 10) -> float:
    """|top-k(a) ∩ top-k(b)| / k' with k' = min(k, the longer list); 1.0 when both are empty."""
    a, b = list(a)[:k], list(b)[:k]
    n = min(k, max(len(a), len(b)))
    return 1.0 if n == 0 else len(set(a) & set(b)) / n


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100) with linear interpolation between closest ranks (numpy's default)."""
    if len(values) == 0:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def qps_per_core(queries: int, wall_s: float, cpu_s: float) -> dict:
    """QPS, cores used (CPU seconds / wall seconds) and QPS per core used."""
    qps = queries / wall_s if wall_s > 0 else float("nan")
    cores = cpu_s / wall_s if wall_s > 0 else float("nan")
    return {"qps": qps, "cores": cores, "qps_per_core": qps / cores if cores > 0 else float("nan")}


def ndcg_at_k(ranked: Sequence, relevant: dict, k: int = 10) -> float:
    """nDCG@k with graded gains rel / log2(rank + 1) (rank from 1); 0.0 when nothing is relevant."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(list(ranked)[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_of_relevant(ranked: Sequence, relevant: dict, k: int = 100) -> float:
    """Share of the relevant documents (gain > 0) found in the top-k."""
    rel = {d for d, g in relevant.items() if g > 0}
    return len(rel & set(list(ranked)[:k])) / len(rel) if rel else 0.0


def median(values: Sequence[float]) -> float:
    """The median (nan for no values)."""
    return float(np.median(values)) if len(values) else float("nan")


def exact_scores(X: np.ndarray, Q: np.ndarray, ids: np.ndarray, metric: str) -> np.ndarray:
    """Scores in float64, higher is better, of query i against rows ids[i] (an (nq, k) array,
    -1 for none: -inf): the DocumentArray API's scores, by its one formula
    (hybridsearch.storages.base.exact_scores)."""
    ids = np.asarray(ids, dtype=np.int64)
    s = np.stack([score_rows(X[np.maximum(r, 0)], q, metric) for r, q in zip(ids, np.asarray(Q))]) \
        if len(ids) else np.zeros(ids.shape)
    return np.where(ids >= 0, s, -np.inf)


def mean_recall(X: np.ndarray, Q: np.ndarray, found, gt: np.ndarray, metric: str, k: int = 10,
                allowed: np.ndarray | None = None) -> tuple:
    """(mean tie-aware recall@k over the queries, ids returned that `allowed` excludes).

    `found`: per query the ids returned (a list of lists or an (nq, k) array, -1 padding
    ignored); `gt`: (nq, k) exact ids, -1 where a query has fewer than k candidates (it is
    judged on those it has). Scores of both sides are recomputed exactly (exact_scores), so
    ground truth from a float32 kernel and a found id tying the k-th score count alike; a
    repeated or disallowed id never counts."""
    gt = np.asarray(gt, dtype=np.int64)[:, :k]
    rows = np.full((len(gt), k), -1, dtype=np.int64)
    violations = 0
    for i, f in enumerate(found):
        seen, kept = set(), []
        for x in list(f)[:k]:
            x = int(x)
            if x < 0 or x in seen:
                continue
            seen.add(x)
            if allowed is not None and not allowed[x]:
                violations += 1
                continue
            kept.append(x)
        rows[i, :len(kept)] = kept
    true_s, found_s = exact_scores(X, Q, gt, metric), exact_scores(X, Q, rows, metric)
    recalls = [recall_at_k(r[r >= 0], g[g >= 0], ts[g >= 0], k, fs[r >= 0])
               for r, g, ts, fs in zip(rows, gt, true_s, found_s)]
    return float(np.mean(recalls)) if recalls else float("nan"), violations


def numpy_topk(X: np.ndarray, Q: np.ndarray, k: int, metric: str = "cosine", allowed: np.ndarray | None = None,
               chunk: int = 65536) -> np.ndarray:
    """(nq, k) ids of the exact top-k rows of X per query by brute force in numpy (float32
    matrix products over `chunk` rows at a time, merged), best first; only rows where `allowed`
    is True count; -1 where fewer than k rows are allowed. A reference independent of our kernels."""
    Q = np.asarray(Q, dtype=np.float32)
    if metric == "cosine":
        Q = Q / np.maximum(np.linalg.norm(Q, axis=1, keepdims=True), 1e-30)
    best_s = np.full((len(Q), k), -np.inf, dtype=np.float32)
    best_i = np.full((len(Q), k), -1, dtype=np.int64)
    for a in range(0, len(X), chunk):
        B = np.asarray(X[a:a + chunk], dtype=np.float32)
        S = Q @ B.T
        if metric == "cosine":
            S /= np.maximum(np.linalg.norm(B, axis=1), 1e-30)
        elif metric == "l2":
            S = 2 * S - np.einsum("ij,ij->i", B, B)  # -|q - x|^2 + |q|^2: the same order
        if allowed is not None:
            S[:, ~np.asarray(allowed[a:a + chunk], dtype=bool)] = -np.inf
        top = np.argpartition(-S, min(k, S.shape[1] - 1), axis=1)[:, :k] if S.shape[1] > k else \
            np.broadcast_to(np.arange(S.shape[1]), (len(Q), S.shape[1]))
        cand_s = np.concatenate([best_s, np.take_along_axis(S, top, 1)], axis=1)
        cand_i = np.concatenate([best_i, top + a], axis=1)
        cand_i[~np.isfinite(cand_s)] = -1
        order = np.argsort(-cand_s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(cand_s, order, 1), np.take_along_axis(cand_i, order, 1)
    return best_i


def mean_overlap(a: Sequence, b: Sequence, k: int = 10) -> float:
    """overlap_at_k averaged over paired result lists (nan for none)."""
    vals = [overlap_at_k(x, y, k) for x, y in zip(a, b)]
    return float(np.mean(vals)) if vals else float("nan")


def spread(values: Sequence[float]) -> dict:
    """{"median", "min", "max", "q1", "q3", "n"} of `values` (the quartiles by percentile());
    every figure nan for no values."""
    xs = [float(v) for v in values]
    return {"median": median(xs), "min": min(xs, default=float("nan")), "max": max(xs, default=float("nan")),
            "q1": percentile(xs, 25), "q3": percentile(xs, 75), "n": len(xs)}


def at_recall(points: list, target: float) -> dict:
    """QPS at `target` recall on a sweep of {"ef", "recall", "qps"} points -> {"qps", "bracketed",
    "how"}: the points taken in ef order (in falling QPS without ef), the first one reaching the
    target and the one before it bracket it, and QPS is linear in recall and in log(QPS) between
    them (bracketed True). When the first point already reaches the target its QPS is returned
    as a lower bound (bracketed False); qps None when no point reaches it."""
    pts = [p for p in points if p.get("qps") and p.get("recall") is not None]
    pts.sort(key=(lambda p: p["ef"]) if all(p.get("ef") is not None for p in pts) else (lambda p: -p["qps"]))
    for i, p in enumerate(pts):
        if p["recall"] >= target:
            if i == 0:
                return {"qps": p["qps"], "bracketed": False, "how": f"ef={p.get('ef')} (already {p['recall']:.3f})"}
            a = pts[i - 1]
            t = (target - a["recall"]) / (p["recall"] - a["recall"])
            qps = math.exp(math.log(a["qps"]) + t * (math.log(p["qps"]) - math.log(a["qps"])))
            return {"qps": qps, "bracketed": True, "how": f"interpolated ef {a.get('ef')}-{p.get('ef')}"}
    best = max((p["recall"] for p in pts), default=None)
    return {"qps": None, "bracketed": False,
            "how": "never reached" + (f" (max {best:.3f})" if best is not None else "")}


def qps_at_recall(points: list, target: float) -> tuple:
    """(QPS, how) of at_recall: interpolated between the points bracketing `target`, the first
    point's QPS (a lower bound) when it already reaches it, (None, why) when none does."""
    r = at_recall(points, target)
    return r["qps"], r["how"]
