"""HNSW benchmark: our native HNSW storage vs hnswlib vs faiss IndexHNSWFlat, side by side.

What it measures, per dataset, with the same m / ef_construct / ef for every engine:

* build time on all cores (the same thread count for every engine), and memory:
  the growth of the resident set (RSS, /proc/self/statm) around the build, plus
  the graph size each engine reports or that follows from its layout (hnswlib:
  ``index_file_size()`` minus vectors and labels; faiss: its neighbour, offset
  and level arrays; ours: ``HnswIndex.nbytes``). Vectors (n * d * 4 bytes) are
  not in the graph figures.
* recall@10 against exact ground truth (faiss ``IndexFlat``) and single-thread
  QPS over an ef sweep: one query per call in a Python loop (what a web request
  does), a warm-up on separate queries first, then 3 timed passes over all
  queries, round-robin over the engines; the median pass gives QPS. Recall is
  tie-aware: a hit counts if its exact score reaches the 10th true score.
* filtered search at 1%, 10% and 50% selectivity (``bucket < t`` on a random
  int attribute in [0, 100)): recall@10 against the exact top-10 among the
  matching vectors, and single-thread QPS, at one ef (64 by default).
  ours: ``find(filter={"bucket": {"$lt": t}})`` (the filter is parsed and
  evaluated per query, as a user's would be) or the raw index with a bitset
  (mode 0: result filter, mode 1: filter-first exploration); hnswlib: its
  ``filter=`` callable on labels (a set's ``__contains__``); faiss:
  ``SearchParametersHNSW`` with an ``IDSelectorBitmap``.

Engines ("ours" exists in two paths; whichever this install has is measured):

* ours (DocumentArray): ``hs.DocumentArray(Doc, storage="hnsw", ...)`` built by one
  ``extend`` of dicts and searched with ``find(vector=q, limit=10, ef=ef)``: what
  users get, the main row, and the one the targets are judged on.
* ours (raw HnswIndex): ``hybridsearch._native._kernels.HnswIndex`` used directly;
  the difference to the row above is the API overhead.
* hnswlib (``pip install "hnswlib>=0.8"``) and faiss ``IndexHNSWFlat``.

Data (fixed seed, queries held out from the same distribution):

* sift: SIFT-like 128-d vectors: a mixture of 1,000 clusters, each a gamma-shaped
  centre plus a random rank-40 spread plus isotropic noise; clipped to [0, 255] and
  rounded to integers as SIFT is; metric l2. At 200k, hnswlib (m=16,
  ef_construct=200) needs ef ~ 35 for recall@10 0.95, about what it needs on SIFT1M.
* emb: embedding-like 384-d unit vectors: 1,000 cluster centres around a shared
  direction, a rank-48 spread per cluster plus noise, normalised; metric ip
  (cosine over unit vectors); nearest neighbour cosine ~0.55.

Run from the repository root:

    python benchmarks/bench_hnsw.py --quick                  # 20k vectors, 200 queries, ~1-2 min
    python benchmarks/bench_hnsw.py                          # 200k vectors, 1,000 queries
    python benchmarks/bench_hnsw.py --dataset sift --n 100000 --ef 16 64 256 --json out.json

QPS at recall@10 >= 0.95 is interpolated on each engine's recall-QPS curve
(linear in recall, log-linear in QPS, between the two sweep points around 0.95);
if the lowest ef already exceeds 0.95, that point's QPS is used (a lower bound).
Ratios are ours / hnswlib: > 1 means we are faster (or, for build time, slower).
"""
import argparse
import ctypes
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from importlib import metadata

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

try:
    import faiss
    FAISS_ERROR = None
except ImportError as exc:  # optional: its rows are skipped
    faiss, FAISS_ERROR = None, str(exc)

try:
    import hnswlib
    HNSWLIB_ERROR = None
except ImportError as exc:  # optional: its rows (and the ratios) are skipped
    hnswlib, HNSWLIB_ERROR = None, str(exc)

import hybridsearch as hs
from machine import cpu_model  # benchmarks/machine.py (the script's own folder is on sys.path)

try:
    from hybridsearch._native import _kernels as K
except ImportError:  # an unbuilt checkout: only the public API path can be tried
    K = None

TOP_K = 10
SEED = 20240607
N_CENTRES = 1000
N_BUCKETS = 100                    # the filter attribute is uniform in [0, N_BUCKETS)
SELECTIVITIES = (1, 10, 50)        # percent of the vectors that match
EF_SWEEP = (10, 16, 32, 64, 128, 256, 512)
RECALL_TARGET = 0.95
REPEATS = 3
N_WARMUP = 100                     # warm-up queries per engine and setting (not in the timed set)
FULL = {"n": 200_000, "queries": 1000}
QUICK = {"n": 20_000, "queries": 200}
# targets, judged on the main "ours" row against hnswlib
QPS_RATIO_TARGET = 1.3             # ours / hnswlib QPS at recall@10 >= RECALL_TARGET
BUILD_RATIO_TARGET = 1.0           # ours / hnswlib build time
FILTER_PCT = 1                     # the selectivity of the filtered target
FILTER_QPS_RATIO_TARGET = 10.0     # ours / hnswlib filtered QPS there, with recall >= RECALL_TARGET


@dataclass
class Config:
    m: int
    ef_construct: int
    efs: tuple
    filter_ef: int
    threads: int
    repeats: int


# ---------------------------------------------------------------- machine
def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def release_free_heap() -> None:
    """Returns freed heap memory to the OS (glibc malloc_trim), so an RSS delta shows new allocations only."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def machine_facts() -> dict:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    pools = [f"{p.get('internal_api')} {p.get('version') or ''}".strip() for p in threadpool_info()]
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "cores_available": affinity,
        "simd": K.simd_level() if K is not None and hasattr(K, "simd_level") else "unknown",
        "python": platform.python_version(), "numpy": np.__version__,
        "hybridsearch": getattr(hs, "__version__", "unknown"),
        "hnswlib": version_of("hnswlib") if hnswlib else f"not available ({HNSWLIB_ERROR})",
        "faiss": faiss.__version__ if faiss else f"not available ({FAISS_ERROR})",
        "threadpools": sorted(set(pools)),
    }


# ---------------------------------------------------------------- data
def unit_rows(A: np.ndarray) -> np.ndarray:
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    return A


def mixture(rng, centres: np.ndarray, n: int, rank: int, spread: float, noise: float) -> np.ndarray:
    """n float32 points: a random centre each, plus that cluster's random rank-`rank` spread, plus noise.

    `spread` and `noise` are standard deviations per coordinate (of each basis vector and of the noise).
    """
    d = centres.shape[1]
    labels = rng.integers(len(centres), size=n)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(len(centres) + 1))
    out = np.empty((n, d), dtype=np.float32)
    for c in range(len(centres)):
        rows = order[bounds[c]:bounds[c + 1]]
        basis = rng.standard_normal((rank, d), dtype=np.float32) * np.float32(spread)
        z = rng.standard_normal((len(rows), rank), dtype=np.float32)
        out[rows] = centres[c] + z @ basis + rng.standard_normal((len(rows), d), dtype=np.float32) * noise
    return out


def sift_like(rng, n: int) -> np.ndarray:
    """128-d, non-negative integer values in [0, 255], many small ones (a gamma-shaped centre per cluster)."""
    centres = rng.gamma(0.5, 28.0, size=(N_CENTRES, 128)).astype(np.float32)
    X = mixture(rng, centres, n, rank=40, spread=5.0, noise=3.0)
    np.clip(X, 0, 255, out=X)
    return np.rint(X, out=X)


def embedding_like(rng, n: int) -> np.ndarray:
    """384-d unit vectors; clusters share a common direction (embeddings are anisotropic)."""
    d = 384
    common = unit_rows(rng.standard_normal((1, d)).astype(np.float32))
    centres = unit_rows(unit_rows(rng.standard_normal((N_CENTRES, d)).astype(np.float32)) + 0.5 * common)
    return unit_rows(mixture(rng, centres, n, rank=48, spread=0.01, noise=0.03))


DATASETS = {"sift": (sift_like, "l2"), "emb": (embedding_like, "ip")}


@dataclass
class Dataset:
    name: str
    metric: str
    X: np.ndarray          # (n, d) float32, C-contiguous: the indexed vectors, row == id
    Q: np.ndarray          # (nq, d) timed queries, held out
    Qwarm: np.ndarray      # (N_WARMUP, d) warm-up queries, held out
    bucket: np.ndarray     # (n,) int64 in [0, N_BUCKETS)
    gt: np.ndarray         # (nq, TOP_K) exact ids


def make_dataset(name: str, n: int, nq: int) -> Dataset:
    gen, metric = DATASETS[name]
    rng = np.random.default_rng([SEED, n, nq, len(name)])
    A = gen(rng, n + nq + N_WARMUP)
    X, Q, Qwarm = (np.ascontiguousarray(a) for a in (A[:n], A[n:n + nq], A[n + nq:]))
    bucket = rng.integers(0, N_BUCKETS, size=n)
    return Dataset(name, metric, X, Q, Qwarm, bucket, exact_topk(X, Q, metric))


def exact_topk(X: np.ndarray, Q: np.ndarray, metric: str, rows=None) -> np.ndarray:
    """Exact top-TOP_K ids (best first) of Q over X, or over X[rows] mapped back to row numbers."""
    sub = X if rows is None else np.ascontiguousarray(X[rows])
    if faiss is not None:
        index = (faiss.IndexFlatL2 if metric == "l2" else faiss.IndexFlatIP)(X.shape[1])
        index.add(sub)
        ids = index.search(Q, TOP_K)[1]
    else:
        ids = np.vstack([np.argsort(-scores64(sub, q[None], None, metric), kind="stable")[:TOP_K]
                         for q in Q])
    return ids if rows is None else np.where(ids < 0, -1, rows[np.maximum(ids, 0)])  # -1: fewer than k rows


def scores64(X: np.ndarray, Q: np.ndarray, ids, metric: str) -> np.ndarray:
    """Exact float64 scores (higher is better) of query i against rows ids[i] (or all rows if ids is None)."""
    Q64 = Q.astype(np.float64)
    if ids is None:
        V = X.astype(np.float64)
        s = Q64 @ V.T
        return s if metric == "ip" else 2 * s - (V * V).sum(1)[None, :] - (Q64 * Q64).sum(1)[:, None]
    V = X[np.where(ids < 0, 0, ids)].astype(np.float64)           # (nq, k, d)
    if metric == "ip":
        return np.einsum("qkd,qd->qk", V, Q64)
    diff = V - Q64[:, None, :]
    return -np.einsum("qkd,qkd->qk", diff, diff)


def recall_at_k(X: np.ndarray, Q: np.ndarray, ids: np.ndarray, gt: np.ndarray, metric: str, allowed=None):
    """Tie-aware recall@k (mean over queries) and the number of returned ids outside `allowed`.

    A returned id counts as a hit if it is distinct, allowed, and its exact score reaches the
    k-th exact score of that query (relative tolerance 1e-5, for float32 rounding). A query with
    fewer than k matching vectors (gt padded with -1) is judged on those it has.
    """
    want = (gt >= 0).sum(1)
    kth = np.where(gt >= 0, scores64(X, Q, gt, metric), np.inf).min(axis=1)
    s = scores64(X, Q, ids, metric)
    tol = 1e-5 * np.maximum(np.abs(kth), 1e-3)
    valid = ids >= 0
    if allowed is not None:
        bad = int((valid & ~allowed[np.where(valid, ids, 0)]).sum())
        valid &= allowed[np.where(valid, ids, 0)]
    else:
        bad = 0
    # drop repeated ids within a row
    order = np.sort(np.where(valid, ids, -1), axis=1)
    dup_free = valid.sum(1) - ((order[:, 1:] == order[:, :-1]) & (order[:, 1:] >= 0)).sum(1)
    hits = (valid & (s >= (kth - tol)[:, None])).sum(1)
    hits = np.minimum(np.minimum(hits, dup_free), want)
    return float(np.mean(hits / np.maximum(want, 1))), bad


# ---------------------------------------------------------------- filters
@dataclass
class Filter:
    pct: int
    threshold: int         # bucket < threshold
    mask: np.ndarray       # (n,) bool
    bits64: np.ndarray     # uint64 bitset, bit i of word i // 64 = row i allowed
    bitmap8: np.ndarray    # the same bits as uint8 (faiss IDSelectorBitmap)
    allowed: frozenset     # for hnswlib's Python filter callable
    gt: np.ndarray         # exact top-k among the matching rows

    @property
    def query(self) -> dict:
        return {"bucket": {"$lt": self.threshold}}


def make_filter(ds: Dataset, pct: int) -> Filter:
    threshold = pct * N_BUCKETS // 100
    mask = ds.bucket < threshold
    rows = np.flatnonzero(mask)
    n = len(mask)
    bitmap8 = np.packbits(mask, bitorder="little")
    padded = np.zeros(((n + 63) // 64) * 8, dtype=np.uint8)
    padded[:len(bitmap8)] = bitmap8
    return Filter(pct, threshold, mask, padded.view("<u8").astype(np.uint64), padded,
                  frozenset(rows.tolist()), exact_topk(ds.X, ds.Q, ds.metric, rows))


# ---------------------------------------------------------------- engines
# An engine builds once (all threads), then hands out searchers: a callable taking one query row,
# specialised for one ef (and filter), whose outputs `ids` turns into an int64 row of TOP_K ids.
class Engine:
    name = ""
    label = ""
    main = False           # the row the targets are judged on
    two_d = True           # queries are passed as (1, d) rows (else 1-D rows)

    def __init__(self, ds: Dataset, cfg: Config):
        self.ds, self.cfg = ds, cfg
        self.build_s = self.rss_delta = self.graph_bytes = None
        self.note = ""

    def build(self) -> None:
        self._prepare()
        release_free_heap()
        before = rss_bytes()
        t0 = time.perf_counter()
        self._build()
        self.build_s = time.perf_counter() - t0
        self.rss_delta = rss_bytes() - before
        self._finish()

    def _prepare(self) -> None:
        """Work before the clock starts."""

    def _finish(self) -> None:
        """Work after the clock and the memory reading."""

    def filtered_variants(self) -> dict:
        """name -> mode for filtered search (engines with several strategies list each)."""
        return {self.name: None}

    def _build(self) -> None:
        raise NotImplementedError

    def plan(self, ef: int, flt) -> "str | None":
        """How the engine answers this filtered search, when it chooses (None: always the same way)."""
        return None

    def searcher(self, ef: int, flt=None, mode=None):
        raise NotImplementedError

    def ids(self, out) -> np.ndarray:
        raise NotImplementedError


class Hnswlib(Engine):
    name = "hnswlib"
    label = "hnswlib (Index.knn_query)"
    two_d = False

    def _build(self):
        X = self.ds.X
        self.index = hnswlib.Index(space=self.ds.metric, dim=X.shape[1])
        self.index.init_index(max_elements=len(X), M=self.cfg.m, ef_construction=self.cfg.ef_construct,
                              random_seed=SEED % 2**31)
        self.index.add_items(X, np.arange(len(X)), num_threads=self.cfg.threads)
        # the saved file is the in-memory layout: level-0 block (links + vector + label) + upper links
        self.graph_bytes = self.index.index_file_size() - len(X) * (X.shape[1] * 4 + 8)
        self.note = "graph = index_file_size() - vectors - labels"

    def searcher(self, ef, flt=None, mode=None):
        self.index.set_ef(max(ef, TOP_K))
        self.index.set_num_threads(1)
        knn = self.index.knn_query
        if flt is None:
            return lambda q: knn(q, k=TOP_K, num_threads=1)
        allowed = flt.allowed.__contains__

        def search(q):
            try:
                return knn(q, k=TOP_K, num_threads=1, filter=allowed)
            except RuntimeError:   # fewer than k allowed results found
                return None
        return search

    def ids(self, out):
        return np.full(TOP_K, -1, np.int64) if out is None else out[0][0].astype(np.int64)


class Faiss(Engine):
    name = "faiss"
    label = "faiss IndexHNSWFlat"

    def _build(self):
        X = self.ds.X
        metric = faiss.METRIC_L2 if self.ds.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        faiss.omp_set_num_threads(self.cfg.threads)
        self.index = faiss.IndexHNSWFlat(X.shape[1], self.cfg.m, metric)
        self.index.hnsw.efConstruction = self.cfg.ef_construct
        self.index.add(X)
        faiss.omp_set_num_threads(1)
        h = self.index.hnsw
        self.graph_bytes = h.neighbors.size() * 4 + h.offsets.size() * 8 + h.levels.size() * 4
        self.note = "graph = neighbors + offsets + levels arrays"

    def searcher(self, ef, flt=None, mode=None):
        if flt is None:
            params = faiss.SearchParametersHNSW(efSearch=ef)
        else:
            sel = faiss.IDSelectorBitmap(len(flt.mask), faiss.swig_ptr(flt.bitmap8))
            params = faiss.SearchParametersHNSW(efSearch=ef, sel=sel)
            params.keep_alive = (sel, flt.bitmap8)
        search = self.index.search
        return lambda q: search(q, TOP_K, params=params)

    def ids(self, out):
        return out[1][0].astype(np.int64)


class OursRaw(Engine):
    name = "ours-raw"
    label = "ours (raw _kernels.HnswIndex)"

    @staticmethod
    def unavailable():
        if K is None:
            return "hybridsearch._native._kernels does not import"
        if not hasattr(K, "HnswIndex"):
            return "hybridsearch._native._kernels has no HnswIndex"
        return None

    quantization = "none"

    def _build(self):
        X = self.ds.X
        self.index = K.HnswIndex(X.shape[1], self.ds.metric, self.cfg.m, self.cfg.ef_construct,
                                 seed=SEED, quantization=self.quantization)
        self.index.reserve(len(X))
        self.index.add(X, np.arange(len(X), dtype=np.int64), self.cfg.threads)
        self.graph_bytes = getattr(self.index, "nbytes", None)
        self.note = "graph = HnswIndex.nbytes; vectors stay in the caller's block"

    def filtered_variants(self):
        return {"ours-raw m0": getattr(K, "HNSW_PLAIN", 0), "ours-raw m1": getattr(K, "HNSW_TWOHOP", 1)}

    def searcher(self, ef, flt=None, mode=None):
        X, search = self.ds.X, self.index.search
        if flt is None:
            return lambda q: search(X, q, TOP_K, ef)
        bits = flt.bits64
        return lambda q: search(X, q, TOP_K, ef, bits=bits, mode=mode)

    def ids(self, out):
        row = np.asarray(out[1][0], dtype=np.int64)
        return np.pad(row, (0, TOP_K - len(row)), constant_values=-1)


class OursRawInt8(OursRaw):
    """The same graph walked over int8 codes, the final candidates re-scored on float32:
    the recall this costs is the difference to the ours-raw column."""

    name = "ours-raw-i8"
    label = "ours (raw HnswIndex, int8)"
    quantization = "int8"

    def filtered_variants(self):
        return {}


def doc_model(d: int) -> type:
    class BenchDoc(hs.Document):
        bucket: int = 0
        v: hs.Vector[d]

    return BenchDoc


class OursAPI(Engine):
    name = "ours-api"
    label = "ours (DocumentArray storage=\"hnsw\")"
    main = True
    two_d = False

    @staticmethod
    def unavailable():
        try:
            OursAPI.open(doc_model(4), "l2", m=16, ef_construct=200, threads=1)[0].close()
        except (hs.UnsupportedError, hs.ConfigError) as e:
            return f"{type(e).__name__}: {e}"
        return None

    @staticmethod
    def open(model, metric, m, ef_construct, threads):
        opts = {"m": m, "ef_construct": ef_construct, "ef": 64, "metric": metric}
        try:
            return hs.DocumentArray(model, storage="hnsw", threads=threads, **opts), ""
        except hs.ConfigError as e:
            if "threads" not in str(e):
                raise
            return hs.DocumentArray(model, storage="hnsw", **opts), "(storage takes no threads= option)"

    def _prepare(self):
        # the documents are the caller's data: made before the clock starts; validating them counts
        X, bucket = self.ds.X, self.ds.bucket.tolist()
        self.docs = [{"id": str(i), "bucket": bucket[i], "v": X[i]} for i in range(len(X))]

    def _build(self):
        self.da, note = self.open(doc_model(self.ds.X.shape[1]), self.ds.metric, self.cfg.m,
                                  self.cfg.ef_construct, self.cfg.threads)
        self.da.extend(self.docs)
        self.note = ("RSS includes the stored documents and columns " + note).strip()
        # not public API: the graph size, if this version of the storage exposes it
        self.graph_bytes = getattr(getattr(self._backend(), "graph", None), "nbytes", None)

    def _backend(self):
        return getattr(self.da, "_backend", None)

    def plan(self, ef, flt):
        """The strategy the storage's planner picks for this filter, if it says (not public API)."""
        backend = self._backend()
        if not hasattr(backend, "last_plan"):
            return None
        self.da.find(vector=self.ds.Q[0], limit=TOP_K, ef=ef, filter=flt.query)
        p = backend.last_plan()
        return None if p is None else f"{getattr(p, 'strategy', p)} (ef {getattr(p, 'ef', '?')})"

    def _finish(self):
        del self.docs

    def searcher(self, ef, flt=None, mode=None):
        find = self.da.find
        if flt is None:
            return lambda q: find(vector=q, limit=TOP_K, ef=ef)
        query = flt.query
        return lambda q: find(vector=q, limit=TOP_K, ef=ef, filter=query)

    def ids(self, out):
        row = np.fromiter((int(i) for i in out.ids), dtype=np.int64, count=len(out.ids))
        return np.pad(row, (0, TOP_K - len(row)), constant_values=-1)


ENGINES = (OursAPI, OursRaw, OursRawInt8, Hnswlib, Faiss)   # the order of the columns


def engine_status() -> dict:
    """name -> None if usable here, else the reason it is not."""
    return {
        OursAPI.name: OursAPI.unavailable(),
        OursRaw.name: OursRaw.unavailable(),
        OursRawInt8.name: OursRaw.unavailable(),
        Hnswlib.name: None if hnswlib else f"hnswlib not installed ({HNSWLIB_ERROR})",
        Faiss.name: None if faiss else f"faiss not installed ({FAISS_ERROR})",
    }


# ---------------------------------------------------------------- timing
def time_round_robin(searchers: dict, repeats: int) -> dict:
    """name -> (queries per second, outputs of the last pass, error) for searchers name -> (fn, rows, warm).

    Each searcher first runs its warm-up rows; then `repeats` passes over all rows, the engines
    taking turns within each pass, one query per call; QPS comes from the median pass.
    """
    live, result = {}, {}
    for name, (fn, rows, warm) in searchers.items():
        try:
            for q in warm:
                fn(q)
            live[name] = (fn, rows)
        except Exception as e:  # a half-finished engine must not stop the others
            result[name] = (None, None, f"{type(e).__name__}: {e}")
    times = {name: [] for name in live}
    outs = {}
    for _ in range(repeats):
        for name, (fn, rows) in live.items():
            out = []
            append = out.append
            t0 = time.perf_counter()
            for q in rows:
                append(fn(q))
            times[name].append(time.perf_counter() - t0)
            outs[name] = out
    for name, (_, rows) in live.items():
        result[name] = (len(rows) / statistics.median(times[name]), outs[name], None)
    return result


def qps_at_recall(points: list, target: float = RECALL_TARGET) -> dict:
    """QPS at `target` recall on a curve of {"ef", "recall", "qps"} points ordered by ef.

    Linear in recall and in log(QPS) between the last point below and the first point at or
    above the target; the lowest ef already reaching it gives its own QPS (a lower bound).
    """
    pts = [p for p in points if p.get("qps")]
    for i, p in enumerate(pts):
        if p["recall"] >= target:
            if i == 0:
                return {"qps": p["qps"], "ef": p["ef"], "how": f"ef={p['ef']} (already {p['recall']:.3f})"}
            a = pts[i - 1]
            t = (target - a["recall"]) / (p["recall"] - a["recall"])
            qps = math.exp(math.log(a["qps"]) + t * (math.log(p["qps"]) - math.log(a["qps"])))
            return {"qps": qps, "ef": p["ef"], "how": f"interpolated ef {a['ef']}-{p['ef']}"}
    best = max((p["recall"] for p in pts), default=None)
    return {"qps": None, "ef": None,
            "how": "never reached" + (f" (max {best:.3f})" if best is not None else "")}


# ---------------------------------------------------------------- one dataset
def build_engines(ds: Dataset, cfg: Config, status: dict) -> tuple:
    engines, failed = [], {}
    for cls in ENGINES:
        if status[cls.name] is not None:
            continue
        engine = cls(ds, cfg)
        try:
            engine.build()
        except Exception as e:  # report, and measure the others
            failed[cls.name] = f"build failed: {type(e).__name__}: {e}"
            print(f"  {cls.label}: {failed[cls.name]}", flush=True)
            continue
        print(f"  built {engine.label} in {engine.build_s:.1f} s", flush=True)
        engines.append(engine)
    return engines, failed


def query_rows(engine: Engine, A: np.ndarray) -> list:
    return [A[i:i + 1] for i in range(len(A))] if engine.two_d else [A[i] for i in range(len(A))]


def run_sweep(ds: Dataset, engines: list, cfg: Config) -> dict:
    """name -> list of {"ef", "recall", "qps"} (or "error")."""
    rows = {e.name: (query_rows(e, ds.Q), query_rows(e, ds.Qwarm)) for e in engines}
    curves = {e.name: [] for e in engines}
    for ef in cfg.efs:
        searchers = {e.name: (e.searcher(ef), *rows[e.name]) for e in engines}
        timed = time_round_robin(searchers, cfg.repeats)
        for e in engines:
            qps, outs, err = timed[e.name]
            if err:
                curves[e.name].append({"ef": ef, "error": err})
                continue
            ids = np.vstack([e.ids(o) for o in outs])
            recall, _ = recall_at_k(ds.X, ds.Q, ids, ds.gt, ds.metric)
            curves[e.name].append({"ef": ef, "recall": recall, "qps": qps})
        print(f"  ef={ef}: " + ", ".join(f"{n} {c[-1]['recall']:.3f}/{c[-1]['qps']:,.0f} qps"
                                        if "qps" in c[-1] else f"{n} error" for n, c in curves.items()),
              flush=True)
    return curves


def run_filtered(ds: Dataset, engines: list, cfg: Config) -> dict:
    """pct -> {"matches", "results": variant -> {"recall", "qps", "violations"} (or "error")}."""
    out = {}
    rows = {e.name: (query_rows(e, ds.Q), query_rows(e, ds.Qwarm)) for e in engines}
    for pct in SELECTIVITIES:
        flt = make_filter(ds, pct)
        searchers, owner = {}, {}
        for e in engines:
            for variant, mode in e.filtered_variants().items():
                searchers[variant] = (e.searcher(cfg.filter_ef, flt, mode), *rows[e.name])
                owner[variant] = e
        timed = time_round_robin(searchers, cfg.repeats)
        res = {}
        for variant, (qps, outs, err) in timed.items():
            if err:
                res[variant] = {"error": err}
                continue
            ids = np.vstack([owner[variant].ids(o) for o in outs])
            recall, bad = recall_at_k(ds.X, ds.Q, ids, flt.gt, ds.metric, allowed=flt.mask)
            res[variant] = {"recall": recall, "qps": qps, "violations": bad,
                            "plan": owner[variant].plan(cfg.filter_ef, flt)}
        out[pct] = {"matches": int(flt.mask.sum()), "results": res}
        print(f"  filter {pct}%: " + ", ".join(f"{v} {r['recall']:.3f}/{r['qps']:,.0f} qps" if "qps" in r
                                              else f"{v} error" for v, r in res.items()), flush=True)
    return out


def run_dataset(name: str, n: int, nq: int, cfg: Config, status: dict) -> dict:
    t0 = time.perf_counter()
    ds = make_dataset(name, n, nq)
    print(f"\n== {name}: {n:,} x {ds.X.shape[1]}, metric {ds.metric}, {nq:,} held-out queries "
          f"(data + exact ground truth {time.perf_counter() - t0:.1f} s) ==", flush=True)
    engines, failed = build_engines(ds, cfg, status)
    with threadpool_limits(limits=1):
        if faiss is not None:
            faiss.omp_set_num_threads(1)
        curves = run_sweep(ds, engines, cfg)
        filtered = run_filtered(ds, engines, cfg)
    result = {
        "dataset": name, "n": n, "d": int(ds.X.shape[1]), "metric": ds.metric, "queries": nq,
        "vector_bytes": int(ds.X.nbytes), "failed": failed,
        "engines": {e.name: {"label": e.label, "main": e.main, "build_s": e.build_s, "rss_delta": e.rss_delta,
                             "graph_bytes": e.graph_bytes, "note": e.note} for e in engines},
        "sweep": curves,
        "at_recall": {name: qps_at_recall(c) for name, c in curves.items()},
        "filtered": filtered,
    }
    del engines
    gc.collect()
    return result


# ---------------------------------------------------------------- report
SHORT = {"ours-api": "ours API", "ours-raw": "ours raw", "ours-raw m0": "ours raw m0",
         "ours-raw m1": "ours raw m1", "ours-raw-i8": "ours raw int8", "hnswlib": "hnswlib", "faiss": "faiss"}


def mib(b) -> str:
    return "n/a" if b is None else f"{b / 2**20:,.1f}"


def ratio(a, b) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def main_ours(r: dict):
    """The engine the targets are judged on: the public API if measured, else the raw index."""
    for name in ("ours-api", "ours-raw"):
        if name in r["engines"]:
            return name
    return None


def print_machine(facts: dict, cfg: Config, status: dict) -> None:
    print("== machine ==")
    for key in ("cpu", "cores", "cores_available", "simd", "python", "numpy", "hybridsearch", "hnswlib", "faiss"):
        print(f"  {key:16s} {facts[key]}")
    print(f"  {'threadpools':16s} {'; '.join(facts['threadpools']) or 'none'}")
    print(f"== settings == m={cfg.m} ef_construct={cfg.ef_construct} ef sweep={list(cfg.efs)} "
          f"filtered ef={cfg.filter_ef} top-{TOP_K}; build on {cfg.threads} threads; search 1 thread "
          f"(threadpool_limits(1), faiss.omp_set_num_threads(1), hnswlib num_threads=1), "
          f"one query per call, median of {cfg.repeats} passes after a warm-up of {N_WARMUP} queries")
    print("== engines ==")
    for cls in ENGINES:
        print(f"  {cls.label:38s} " + ("measured" if status[cls.name] is None
                                       else f"not available: {status[cls.name]}"))
    if status["ours-api"] and status["ours-raw"]:
        print("  ours: not available")


def print_dataset(r: dict) -> None:
    names = list(r["engines"])
    hl = r["engines"].get("hnswlib", {}).get("build_s")
    print(f"\n== {r['dataset']}: {r['n']:,} x {r['d']} float32 ({mib(r['vector_bytes'])} MiB of vectors), "
          f"metric {r['metric']}, {r['queries']:,} queries ==")
    for name, why in r["failed"].items():
        print(f"  {name}: {why}")
    print(f"  {'build':34s} {'seconds':>9s} {'/hnswlib':>9s} {'RSS delta MiB':>14s} {'graph MiB':>10s}  note")
    for name in names:
        e = r["engines"][name]
        print(f"  {e['label']:34s} {e['build_s']:9.2f} {ratio(e['build_s'], hl):>9s} "
              f"{mib(e['rss_delta']):>14s} {mib(e['graph_bytes']):>10s}  {e['note']}")
    if not names:
        return
    print(f"\n  recall@{TOP_K} / single-thread QPS per ef:")
    print("  " + f"{'ef':>5s}" + "".join(f"  {SHORT[n]:>19s}" for n in names))
    for i, ef in enumerate(p["ef"] for p in r["sweep"][names[0]]):
        cells = []
        for n in names:
            p = r["sweep"][n][i]
            cells.append(f"{'error':>19s}" if "error" in p else f"{p['recall']:6.3f} {p['qps']:>12,.0f}")
        print("  " + f"{ef:>5d}" + "".join(f"  {c}" for c in cells))
    print(f"  QPS at recall@{TOP_K} >= {RECALL_TARGET}:")
    for n in names:
        a = r["at_recall"][n]
        qps = "n/a" if a["qps"] is None else f"{a['qps']:,.0f}"
        print(f"    {SHORT[n]:12s} {qps:>10s}  ({a['how']})")
    for n in r["sweep"]:
        for p in r["sweep"][n]:
            if "error" in p:
                print(f"  {n} ef={p['ef']}: {p['error']}")

    variants = list(next(iter(r["filtered"].values()))["results"]) if r["filtered"] else []
    print(f"\n  filtered (bucket < t), ef={r.get('filter_ef')}: recall@{TOP_K} vs exact among matches "
          "/ single-thread QPS:")
    print("  " + f"{'select.':>8s} {'matches':>8s}" + "".join(f"  {SHORT[v]:>19s}" for v in variants))
    for pct, f in r["filtered"].items():
        cells = []
        for v in variants:
            x = f["results"][v]
            cells.append(f"{'error':>19s}" if "error" in x else f"{x['recall']:6.3f} {x['qps']:>12,.0f}")
        print("  " + f"{str(pct) + '%':>8s} {f['matches']:>8,d}" + "".join(f"  {c}" for c in cells))
    for pct, f in r["filtered"].items():
        for v, x in f["results"].items():
            if "error" in x:
                print(f"  {pct}% {v}: {x['error']}")
            elif x["violations"]:
                print(f"  {pct}% {v}: {x['violations']} returned ids do not match the filter")
    plans = {pct: f["results"]["ours-api"].get("plan") for pct, f in r["filtered"].items()
             if "ours-api" in f["results"]}
    if any(plans.values()):
        print("  ours API planner chose: " + ", ".join(f"{pct}% {p}" for pct, p in plans.items()))

    ours = main_ours(r)
    if ours is None:
        print("\n  ours: not available")
        return
    h_qps = r["at_recall"].get("hnswlib", {}).get("qps")
    h_build = r["engines"].get("hnswlib", {}).get("build_s")
    hx = r["filtered"].get(FILTER_PCT, {}).get("results", {}).get("hnswlib", {})
    for n in [x for x in ("ours-api", "ours-raw", "ours-raw-i8") if x in r["engines"]]:
        print(f"\n  {r['engines'][n]['label']}{' [main row]' if n == ours else ''}:")
        print(f"    QPS at recall>={RECALL_TARGET} ours/hnswlib: {ratio(r['at_recall'][n]['qps'], h_qps)}  "
              f"(faiss/hnswlib {ratio(r['at_recall'].get('faiss', {}).get('qps'), h_qps)})")
        print(f"    build time ours/hnswlib: {ratio(r['engines'][n]['build_s'], h_build)}")
        fv, fx = best_filtered(r, n)
        if fx and "qps" in fx:
            print(f"    {FILTER_PCT}% filter ({SHORT[fv]}): recall {fx['recall']:.3f}, "
                  f"QPS ours/hnswlib {ratio(fx['qps'], hx.get('qps'))}")


def best_filtered(r: dict, ours: str) -> tuple:
    """(variant, result) of `ours` at FILTER_PCT: the fastest with recall >= target, else the best recall."""
    res = r["filtered"].get(FILTER_PCT, {}).get("results", {})
    mine = {v: x for v, x in res.items() if v.startswith(ours) and "qps" in x}
    if not mine:
        return None, None
    good = {v: x for v, x in mine.items() if x["recall"] >= RECALL_TARGET}
    pick = max(good, key=lambda v: good[v]["qps"]) if good else max(mine, key=lambda v: mine[v]["recall"])
    return pick, mine[pick]


def evaluate_targets(results: list) -> list:
    rows = []

    def add(r, ours, target, value, fmt, ok):
        rows.append({"dataset": r["dataset"], "engine": ours, "target": target,
                     "value": value, "shown": "n/a" if value is None else fmt.format(value),
                     "pass": None if value is None else bool(ok(value))})

    for r in results:
        ours = main_ours(r)
        if ours is None:
            continue
        h_qps = r["at_recall"].get("hnswlib", {}).get("qps")
        o_qps = r["at_recall"][ours]["qps"]
        add(r, ours, f"QPS at recall>={RECALL_TARGET}: ours >= {QPS_RATIO_TARGET}x hnswlib",
            o_qps / h_qps if o_qps and h_qps else None, "{:.2f}x", lambda v: v >= QPS_RATIO_TARGET)
        h_b = r["engines"].get("hnswlib", {}).get("build_s")
        add(r, ours, "build time: ours <= hnswlib", r["engines"][ours]["build_s"] / h_b if h_b else None,
            "{:.2f}x", lambda v: v <= BUILD_RATIO_TARGET)
        variant, x = best_filtered(r, ours)
        hx = r["filtered"].get(FILTER_PCT, {}).get("results", {}).get("hnswlib", {})
        add(r, variant or ours, f"{FILTER_PCT}% filter: ours recall@{TOP_K} >= {RECALL_TARGET}",
            x["recall"] if x else None, "{:.3f}", lambda v: v >= RECALL_TARGET)
        add(r, variant or ours, f"{FILTER_PCT}% filter: ours QPS >= {FILTER_QPS_RATIO_TARGET:g}x hnswlib",
            x["qps"] / hx["qps"] if x and hx.get("qps") else None, "{:.2f}x",
            lambda v: v >= FILTER_QPS_RATIO_TARGET)
    return rows


def print_targets(rows: list, status: dict) -> None:
    print("\n== TARGETS (main ours row vs hnswlib, measured in this run) ==")
    if not rows:
        print("  ours: not available -- no targets evaluated")
        return
    if status["hnswlib"]:
        print(f"  hnswlib not available ({status['hnswlib']}): ratio targets are n/a")
    for t in rows:
        verdict = {True: "PASS", False: "MISS", None: "n/a"}[t["pass"]]
        print(f"  [{t['dataset']:>4s}] {t['target']:44s} {t['shown']:>8s}  {verdict}   ({SHORT[t['engine']]})")


# ---------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK['n']:,} vectors and {QUICK['queries']} queries (default {FULL['n']:,} / "
                        f"{FULL['queries']:,})")
    p.add_argument("--n", type=int, help="vectors per dataset")
    p.add_argument("--queries", type=int, help="timed queries per dataset")
    p.add_argument("--dataset", choices=("sift", "emb", "both"), default="both")
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--ef-construct", type=int, default=200)
    p.add_argument("--ef", type=int, nargs="+", default=list(EF_SWEEP), help="search ef sweep")
    p.add_argument("--filter-ef", type=int, default=64, help="ef of the filtered searches")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="build threads (all engines)")
    p.add_argument("--repeats", type=int, default=REPEATS, help="timed passes per setting (median)")
    p.add_argument("--json", metavar="PATH", help="also write all figures to this JSON file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    base = QUICK if args.quick else FULL
    n, nq = args.n or base["n"], args.queries or base["queries"]
    cfg = Config(args.m, args.ef_construct, tuple(sorted(set(args.ef))), args.filter_ef, args.threads,
                 args.repeats)
    names = ("sift", "emb") if args.dataset == "both" else (args.dataset,)
    started = time.perf_counter()
    facts = machine_facts()
    status = engine_status()
    print_machine(facts, cfg, status)
    results = []
    for name in names:
        r = run_dataset(name, n, nq, cfg, status)
        r["filter_ef"] = cfg.filter_ef
        results.append(r)
    for r in results:
        print_dataset(r)
    targets = evaluate_targets(results)
    print_targets(targets, status)
    wall = time.perf_counter() - started
    print(f"\ntotal wall time {wall:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": facts, "config": {**vars(cfg), "top_k": TOP_K, "warmup": N_WARMUP},
                       "engines": status, "datasets": results, "targets": targets, "wall_s": wall},
                      f, indent=2, default=str)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
