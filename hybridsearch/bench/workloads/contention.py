"""Reads per second under concurrent writers against the same readers alone, per storage:
R reader threads loop on find(vector=q, limit=10); W writer threads loop on small writes,
alternating update(id, price=...) and extend([one new document]); the two phases alternate in
rounds so that drift on a shared machine falls on both."""
from __future__ import annotations

import time

import numpy as np

from hybridsearch.bench.adapters.ours import (
    close_collection,
    extend_in_batches,
    open_collection,
    product_model,
)
from hybridsearch.bench.concurrency import readers_and_writers
from hybridsearch.bench.metrics import percentile


def contention(storage: str, prod, tmp: str, readers: int, writers: int, seconds: float, warmup: float,
               rounds: int) -> dict:
    """{"storage", "build_s", "reads_alone", "reads_with_writers" (per second), "ratio",
    "writes" (per second), "p50_ms", "p99_ms" (reads under writers), "p99_alone_ms"}."""
    docs, Q = prod.docs, prod.query_vectors
    n, nq = len(docs), len(Q)
    da = open_collection(storage, product_model(Q.shape[1]), {}, tmp)
    t0 = time.perf_counter()
    extend_in_batches(da, docs, 5000)
    build = time.perf_counter() - t0
    rngs = {}

    def read(i, k):
        da.find(vector=Q[(i * 97 + k) % nq], limit=10)

    def write(i, k, tag):
        rng = rngs.setdefault((tag, i), np.random.default_rng(1000 + i))
        if k % 2 == 0:
            da.update(str(int(rng.integers(n))), price=int(rng.integers(1000)))
        else:
            da.extend([dict(docs[int(rng.integers(n))], id=f"{tag}-w{i}-{k}")])

    def phase(w, tag, secs):
        return readers_and_writers(read, lambda i, k: write(i, k, tag), readers, w, secs)

    phase(writers, "warm", warmup)
    alone, under, nw = [], [], 0
    for r in range(rounds):
        alone.append(phase(0, "a", seconds / rounds)[0])
        lat, w = phase(writers, f"r{r}", seconds / rounds)
        under.append(lat)
        nw += w
    close_collection(da)
    alone, under = np.concatenate(alone), np.concatenate(under)
    ra, ru = len(alone) / seconds, len(under) / seconds
    return {"storage": storage, "build_s": build, "reads_alone": ra, "reads_with_writers": ru,
            "ratio": ru / ra if ra else float("nan"), "writes": nw / seconds,
            "p50_ms": 1000 * percentile(under, 50), "p99_ms": 1000 * percentile(under, 99),
            "p99_alone_ms": 1000 * percentile(alone, 99)}
