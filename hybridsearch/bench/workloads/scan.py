"""One exact single-query scan at one SIMD level, against the memory bandwidth: our kernel, numpy
and faiss over the same float32 block (ip and l2) and over the same block as int8 codes, each as
milliseconds per query, GB/s of the block it reads, and a fraction of the machine's
single-thread read bandwidth (a streaming C loop over the same bytes).

The level is a process-wide setting of every library (ours: force_simd; faiss: FAISS_SIMD_LEVEL
or, in older wheels, FAISS_OPT_LEVEL; numpy's OpenBLAS: OPENBLAS_CORETYPE), so each level runs in
a child process started with those variables: `LEVEL_ENV` says which. Call `run` under
threadpool_limits(1)."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import faiss_flat, installed, numpy_flat, numpy_topk
from hybridsearch.bench.adapters.ours import exact
from hybridsearch.bench.metrics import mean_overlap
from hybridsearch.bench.timing import median_seconds, round_robin
from hybridsearch.engine.exact import Int8Scan, force_simd, simd_levels, stream_sum

K = 10
# what each library is held to for one of our levels: the closest level it has
LEVEL_ENV = {
    "avx512": {"FAISS_SIMD_LEVEL": "AVX512", "FAISS_OPT_LEVEL": "avx512", "OPENBLAS_CORETYPE": "SkylakeX"},
    "avx2": {"FAISS_SIMD_LEVEL": "AVX2", "FAISS_OPT_LEVEL": "avx2", "OPENBLAS_CORETYPE": "Haswell"},
    # x86-64's baseline has SSE2: our "scalar" C is auto-vectorised to it, as faiss's generic
    # build and OpenBLAS's pre-AVX kernels are
    "scalar": {"FAISS_SIMD_LEVEL": "NONE", "FAISS_OPT_LEVEL": "generic", "OPENBLAS_CORETYPE": "Prescott"},
    "neon": {},
}


def bandwidth(X: np.ndarray, repeats: int = 9) -> dict:
    """The read bandwidth reference: GB/s of the streaming C sum over X's bytes (median of warm
    runs, at the CPU's best level whatever level is being measured) and numpy's add.reduce."""
    flat = X.reshape(-1)
    level = force_simd(simd_levels()[-1])
    c = X.nbytes / median_seconds(lambda: stream_sum(flat), repeats) / 1e9
    npy = X.nbytes / median_seconds(lambda: np.add.reduce(flat), repeats) / 1e9
    return {"gbps": c, "numpy_reduce_gbps": npy, "probe_level": level}


def quantize(X: np.ndarray) -> np.ndarray:
    """int8 codes of X with one scale for the whole block (round(x * 127 / max|x|))."""
    scale = 127.0 / float(np.abs(X).max())
    return np.clip(np.rint(X * scale), -127, 127).astype(np.int8)


def faiss_level() -> str:
    """The SIMD level faiss reports it dispatches to ("" if it cannot say)."""
    import faiss
    cfg = getattr(faiss, "SIMDConfig", None)
    return cfg.get_level_name() if cfg is not None else ""


def numpy_level() -> str:
    """The kernel family numpy's BLAS runs ("" if threadpoolctl cannot say)."""
    from threadpoolctl import threadpool_info
    return ",".join(str(p.get("architecture", "")) for p in threadpool_info() if p.get("user_api") == "blas")


def _float_methods(X: np.ndarray, metric: str) -> dict:
    """name -> fn(query block (1, d)) -> (1, K) ids: ours, numpy, faiss IndexFlat (if installed),
    as the exact-scan workload builds them."""
    out = {"ours": exact(X, metric, K)}
    if metric == "ip":
        out["numpy"] = numpy_flat(X, K)
    else:  # ||x - q||^2 ranks as 2 x.q - ||x||^2, with the norms kept, as a numpy user would
        sq = np.einsum("ij,ij->i", X, X)
        out["numpy"] = lambda Q: numpy_topk(2 * (X @ Q[0])[None, :] - sq, K)
    if installed("faiss"):
        out["faiss"] = faiss_flat(X, metric, K)
    return out


def _int8_methods(C: np.ndarray, X: np.ndarray) -> dict:
    """name -> fn(query block (1, d)) -> top-K ids over 8-bit codes: ours (Int8Scan), numpy
    (`C @ q`, which converts the codes per query), faiss IndexScalarQuantizer QT_8bit_uniform."""
    ours = Int8Scan(C)
    out = {"ours": lambda Q: ours.search(Q[0], K)[1][None, :],
           "numpy": lambda Q: numpy_topk((C @ Q[0])[None, :], K)}
    if installed("faiss"):
        import faiss
        faiss.omp_set_num_threads(1)
        index = faiss.IndexScalarQuantizer(X.shape[1], faiss.ScalarQuantizer.QT_8bit_uniform,
                                           faiss.METRIC_INNER_PRODUCT)
        index.train(X[:100_000])
        index.add(X)
        out["faiss"] = lambda Q: index.search(Q, K)[1]
    return out


def _time(fns: dict, Q: np.ndarray, repeats: int) -> dict:
    """name -> {"s": median seconds per query, "ids": the last pass's ids}, one (1, d) block a call."""
    blocks = [Q[i:i + 1] for i in range(len(Q))]
    r = round_robin(fns, blocks[3:], blocks[:3], repeats, keep=True)
    return {m: {"s": 1 / v["qps"], "ids": np.vstack(v["out"])} for m, v in r.items() if "qps" in v}


def run(level: str, n: int, d: int, queries: int = 30, repeats: int = 5, seed: int = 20241124) -> dict:
    """Every figure of one level: bandwidth, then per workload (ip, l2, int8 ip) each method's
    ms, GB/s and fraction of the bandwidth, and the overlap of our ids with numpy's."""
    X, Q = V.gaussian(n, queries + 3, d, seed)
    bw = bandwidth(X)
    got = force_simd(level)
    res = {"level": got, "asked": level, "n": n, "d": d, "bandwidth": bw, "faiss_level": "", "numpy_level": numpy_level(),
           "workloads": {}}
    if installed("faiss"):
        res["faiss_level"] = faiss_level()
    C = quantize(X)
    plans = {"float32 ip": (_float_methods(X, "ip"), X.nbytes), "float32 l2": (_float_methods(X, "l2"), X.nbytes),
             "int8 ip": (_int8_methods(C, X), C.nbytes)}
    for name, (fns, nbytes) in plans.items():
        timed = _time(fns, Q, repeats)
        row = {m: {"ms": t["s"] * 1e3, "gbps": nbytes / t["s"] / 1e9, "of_bandwidth": nbytes / t["s"] / 1e9 / bw["gbps"]}
               for m, t in timed.items()}
        row["bytes"] = nbytes
        if "numpy" in timed:
            row["overlap_vs_numpy"] = mean_overlap(timed["ours"]["ids"], timed["numpy"]["ids"], K)
        res["workloads"][name] = row
    return res
