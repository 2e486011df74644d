"""Exact top-k on one thread: our kernel (ExactIndex) against numpy and faiss IndexFlat, for a
single query and for a batch, timed round-robin after a warm-up; the machine's single-thread
read bandwidth as the bound of a scan; the public API's cost over the kernel; our ids checked
against numpy's in the same run. Call it under threadpool_limits(1)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import faiss_flat, installed, numpy_flat
from hybridsearch.bench.adapters.ours import (
    close_collection,
    exact,
    extend_in_batches,
    model,
)
from hybridsearch.bench.metrics import mean_overlap
from hybridsearch.bench.timing import round_robin
from hybridsearch.bench.workloads.scan import bandwidth as scan_bandwidth

K = 10
N_SINGLE = 30           # single queries timed
BATCH = 1000            # queries per batch
API_MAX_DOCS = 200_000  # building documents is slow: the API is timed up to this size


@dataclass(frozen=True)
class Size:
    """A dataset size "NxD", with a trailing "n" for unit rows."""
    n: int
    d: int
    normalise: bool

    @classmethod
    def parse(cls, text: str) -> Size:
        """"1000000x128" or "200000x384n" -> Size."""
        n, d = text.rstrip("n").lower().split("x")
        return cls(int(n), int(d), text.endswith("n"))

    @property
    def label(self) -> str:
        """The size as parse() reads it."""
        return f"{self.n}x{self.d}" + ("n" if self.normalise else "")


def methods(X: np.ndarray, metric: str) -> dict:
    """name -> fn(query block) -> (nq, K) ids: ours, numpy (ip only), faiss (ip and l2, if installed)."""
    out = {"ours": exact(X, metric, K)}
    if metric == "ip":
        out["numpy"] = numpy_flat(X, K)
    if installed("faiss") and metric in ("ip", "l2"):
        out["faiss"] = faiss_flat(X, metric, K)
    return out


def _workloads(fns: dict, Q: np.ndarray, Qwarm: np.ndarray, repeats: int) -> dict:
    """{"single": {method: (seconds per query, ids)}, "batch": {method: (seconds per batch, ids)}}."""
    singles = [Q[i:i + 1] for i in range(N_SINGLE)]
    one = round_robin(fns, singles, [Qwarm[i:i + 1] for i in range(3)], repeats, keep=True)
    whole = round_robin(fns, [Q], [Qwarm], repeats, keep=True)
    return {"single": {m: (1 / r["qps"], np.vstack(r["out"])) for m, r in one.items()},
            "batch": {m: (1 / r["qps"], r["out"][-1]) for m, r in whole.items()}}


def bandwidth(X: np.ndarray, repeats: int = 7) -> dict:
    """Single-thread read GB/s over X (the streaming C loop of scan.bandwidth) and the time it
    allows for one scan: the bound a single query cannot beat."""
    gbps = scan_bandwidth(X, repeats)["gbps"]
    return {"gbps": gbps, "bound_s": X.nbytes / gbps / 1e9}


def api_overhead(X: np.ndarray, Q: np.ndarray, Qwarm: np.ndarray, kernel_ids: np.ndarray, repeats: int) -> dict:
    """find(vector=q, limit=10) on an ip DocumentArray ("memory") against the kernel alone,
    timed alternately: seconds per query of each, their ratio, and how often the ids agree."""
    import hybridsearch as hs
    da = hs.DocumentArray(model("Doc", {"v": hs.Vector[X.shape[1]]}), metric="ip")
    extend_in_batches(da, [{"id": str(i), "v": X[i]} for i in range(len(X))])
    fns = {"kernel": exact(X, "ip", K), "api": lambda q: da.find(vector=q[0], limit=K).ids}
    r = round_robin(fns, [Q[i:i + 1] for i in range(N_SINGLE)], [Qwarm[i:i + 1] for i in range(3)], repeats,
                    keep=True)
    same = np.mean([ids == [str(x) for x in row] for ids, row in zip(r["api"]["out"], kernel_ids)])
    close_collection(da)
    api, kernel = 1 / r["api"]["qps"], 1 / r["kernel"]["qps"]
    return {"single_s": api, "kernel_single_s": kernel, "overhead_ratio": api / kernel, "ids_equal": float(same)}


def run(size: Size, with_api: bool = True, repeats: int = 3, seed: int = 20240531) -> dict:
    """Every figure of one dataset: per metric the single and batch seconds of each method,
    bandwidth, overlap of our ids with numpy's (ip) and faiss' (batch), the API overhead."""
    X, Qall = V.gaussian(size.n, BATCH + 128, size.d, seed, size.normalise)
    Q, Qwarm = np.ascontiguousarray(Qall[:BATCH]), np.ascontiguousarray(Qall[BATCH:])
    res = {"size": size.label, "n": size.n, "d": size.d, "bytes": X.nbytes, "bandwidth": bandwidth(X), "metrics": {}}
    for metric in ("ip", "l2", "cosine"):
        runs = _workloads(methods(X, metric), Q, Qwarm, repeats)
        res["metrics"][metric] = {w: {m: t for m, (t, _) in r.items()} for w, r in runs.items()}
        if metric == "ip":
            res["overlap_vs_numpy"] = {w: mean_overlap(r["ours"][1], r["numpy"][1], K) for w, r in runs.items()}
            ip_single = runs["single"]["ours"][1]
        if "faiss" in runs["batch"]:
            res.setdefault("overlap_vs_faiss", {})[metric] = mean_overlap(runs["batch"]["ours"][1],
                                                                          runs["batch"]["faiss"][1], K)
    if with_api and size.n <= API_MAX_DOCS:
        res["api"] = api_overhead(X, Q, Qwarm, ip_single, repeats)
    return res
