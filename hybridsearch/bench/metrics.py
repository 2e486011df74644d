"""The numbers a benchmark reports, as plain functions (unit-tested against hand-computed values)."""
from __future__ import annotations

import math
import time
from typing import Optional, Sequence

import numpy as np


def recall_at_k(found: Sequence, true_ids: Sequence, true_scores: Optional[Sequence] = None, k: int = 10,
                found_scores: Optional[Sequence] = None, tol: float = 1e-5) -> float:
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


class CpuClock:
    """Wall time and this process's CPU time (plus another process's, e.g. a search node, from /proc)."""

    def __init__(self, pid: Optional[int] = None) -> None:
        self.pid = pid

    def _other(self) -> float:
        if self.pid is None:
            return 0.0
        import os
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> "CpuClock":
        self.w0, self.c0, self.o0 = time.perf_counter(), time.process_time(), self._other()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0
        self.other_cpu = self._other() - self.o0


def median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else float("nan")
