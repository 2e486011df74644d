"""Single-threaded benchmark of exact top-10 vector search: our C kernel vs numpy vs faiss.

What it measures, per dataset (random standard-normal float32, fixed seed; rows
of the 384-d set are L2-normalised):

* metric "ip" (the main comparison), top-10:
    - ours:  ``hybridsearch._native._kernels.exact_search``
    - numpy: ``X @ q`` (or ``Qc @ X.T`` per chunk of 64 queries) + ``np.argpartition``
             + a sort of the 10 survivors
    - faiss: ``IndexFlatIP`` (skipped, with a note, if faiss is not installed)
  for two workloads: a single query (30 queries, median time per query) and a
  batch of 1,000 queries (median of 3 runs of the whole batch).
* metrics "l2" and "cosine" for information (ours, plus faiss ``IndexFlatL2``).
* the single-thread read bandwidth of the machine (best of our ``stream_sum``
  and ``np.add.reduce`` over the same vectors, median of several warm runs) and
  the resulting lower bound for one scan: n * d * 4 bytes / (GB/s).
* the public API path (``DocumentArray.find``) for the single query, on
  datasets of at most 200,000 documents, as an overhead ratio vs the raw kernel.
* correctness in the same run: our top-10 ids must match numpy's (>= 99.9%).

Everything runs on ONE thread: the OMP/OpenBLAS/MKL thread counts are set to 1
before numpy and faiss are imported, faiss.omp_set_num_threads(1) is called,
and all timing happens inside threadpoolctl.threadpool_limits(1). Methods are
timed round-robin (ours, numpy, faiss, ours, ...) after a warm-up, so noise on
a shared machine hits all of them alike; medians are reported.

Run from the repository root:

    python benchmarks/bench_exact.py --quick          # 100k x 128 and 50k x 384, < 1 minute
    python benchmarks/bench_exact.py                  # 1M x 128 and 200k x 384, a few minutes
    python benchmarks/bench_exact.py --sizes 500000x128 100000x384n --json out.json

A size is NxD; a trailing "n" normalises the rows. Ratios > 1 mean we are faster.
The process exits with status 1 if the correctness check fails.
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402

from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

try:
    import faiss  # noqa: E402

    faiss.omp_set_num_threads(1)
    FAISS_ERROR = None
except ImportError as exc:  # faiss is optional: its columns are skipped
    faiss = None
    FAISS_ERROR = str(exc)

import hybridsearch as hs  # noqa: E402
from hybridsearch._native import _kernels as K  # noqa: E402

TOP_K = 10
SEED = 20240531
N_SINGLE = 30           # single queries timed (median per query)
N_SINGLE_WARMUP = 3
BATCH = 1000            # queries per batch
BATCH_REPEATS = 3       # runs of the whole batch (median)
BATCH_WARMUP = 128      # queries in the warm-up batch
NUMPY_CHUNK = 64        # queries per numpy matmul, keeps the score matrix bounded
BANDWIDTH_REPEATS = 7
API_MAX_DOCS = 200_000  # building pydantic documents is slow: API timing only up to here
API_EXTEND_BATCH = 10_000
MIN_OVERLAP = 0.999     # our ids vs numpy's; float ties may swap the 10th/11th hit
FULL_SIZES = ["1000000x128", "200000x384n"]
QUICK_SIZES = ["100000x128", "50000x384n"]
TARGETS = (("numpy", 2.0), ("faiss", 1.0))  # ours must be >= this many times faster
BOUND_TARGET = 1.5                            # ours single query within this factor of the scan bound


# ---------------------------------------------------------------- data and machine
@dataclass(frozen=True)
class Size:
    n: int
    d: int
    normalise: bool

    @classmethod
    def parse(cls, text: str) -> "Size":
        norm = text.endswith("n")
        n, d = text.rstrip("n").lower().split("x")
        return cls(int(n), int(d), norm)

    @property
    def label(self) -> str:
        return f"{self.n}x{self.d}" + ("n" if self.normalise else "")


def make_data(size: Size):
    """Vectors X (n, d) and BATCH + warm-up queries, float32, C-contiguous, seeded by the size."""
    rng = np.random.default_rng([SEED, size.n, size.d])
    X = rng.standard_normal((size.n, size.d), dtype=np.float32)
    Q = rng.standard_normal((BATCH + BATCH_WARMUP, size.d), dtype=np.float32)
    if size.normalise:
        for A in (X, Q):
            A /= np.linalg.norm(A, axis=1, keepdims=True)
    return X, Q[:BATCH].copy(), Q[BATCH:].copy()


def aux_for(X: np.ndarray, metric: str):
    """The per-row auxiliary array our kernel takes: None, 1/||x|| or ||x||^2."""
    if metric == "ip":
        return None
    sq = np.einsum("ij,ij->i", X, X).astype(np.float32)
    return (1.0 / np.sqrt(sq)).astype(np.float32) if metric == "cosine" else sq


def machine_facts() -> dict:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    pools = [f"{p.get('internal_api')} {p.get('version') or ''}".strip() + f" (threads={p.get('num_threads')})"
             for p in threadpool_info()]
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(), "cores_available": affinity,
        "python": platform.python_version(), "numpy": np.__version__,
        "faiss": faiss.__version__ if faiss else f"not available ({FAISS_ERROR})",
        "simd": K.simd_level(), "threadpools": pools,
    }


# ---------------------------------------------------------------- search methods
# Every method maps a C-contiguous (nq, d) query block to int64 ids (nq, TOP_K), best first.
def ours(X: np.ndarray, metric: str):
    aux, n = aux_for(X, metric), X.shape[0]
    return lambda Q: K.exact_search(X, n, aux, Q, metric, None, TOP_K)[1]


def numpy_topk(S: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k largest scores of every row of S (c, n), best first."""
    n = S.shape[1]
    part = np.argpartition(S, n - k, axis=1)[:, n - k:]
    order = np.argsort(-np.take_along_axis(S, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def numpy_ip(X: np.ndarray):
    def search(Q):
        if Q.shape[0] == 1:
            return numpy_topk((X @ Q[0])[None, :], TOP_K)
        # (chunk, n) rows keep argpartition contiguous; much faster than X @ Qc.T along axis 0
        return np.vstack([numpy_topk(Q[i:i + NUMPY_CHUNK] @ X.T, TOP_K)
                          for i in range(0, Q.shape[0], NUMPY_CHUNK)])
    return search


def faiss_flat(X: np.ndarray, metric: str):
    index = (faiss.IndexFlatIP if metric == "ip" else faiss.IndexFlatL2)(X.shape[1])
    index.add(X)
    return lambda Q: index.search(Q, TOP_K)[1]


def methods_for(X: np.ndarray, metric: str) -> dict:
    methods = {"ours": ours(X, metric)}
    if metric == "ip":
        methods["numpy"] = numpy_ip(X)
    if faiss is not None and metric in ("ip", "l2"):
        methods["faiss"] = faiss_flat(X, metric)
    return methods


# ---------------------------------------------------------------- timing
def bench(methods: dict, inputs: list, warmup: list):
    """Median seconds per input and the outputs of every method, timed round-robin after a warm-up."""
    for fn in methods.values():
        for x in warmup:
            fn(x)
    times = {name: [] for name in methods}
    outs = {name: [] for name in methods}
    for x in inputs:
        for name, fn in methods.items():
            t0 = time.perf_counter()
            out = fn(x)
            times[name].append(time.perf_counter() - t0)
            outs[name].append(out)
    return {name: statistics.median(t) for name, t in times.items()}, outs


def run_workloads(methods: dict, Q: np.ndarray, Qwarm: np.ndarray) -> dict:
    """{"single": (seconds per query, ids), "batch": (seconds per batch, ids)} for each method."""
    singles = [Q[i:i + 1] for i in range(N_SINGLE)]
    warm = [Qwarm[i:i + 1] for i in range(N_SINGLE_WARMUP)]
    t_single, o_single = bench(methods, singles, warm)
    t_batch, o_batch = bench(methods, [Q] * BATCH_REPEATS, [Qwarm])
    return {
        "single": {m: (t_single[m], np.vstack(o_single[m])) for m in methods},
        "batch": {m: (t_batch[m], o_batch[m][-1]) for m in methods},
    }


def median_time(fn, repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_bandwidth(X: np.ndarray) -> dict:
    """Single-thread read GB/s over X, by our stream_sum and by numpy; the best one is the machine's."""
    flat = X.reshape(-1)
    gbps = {
        "stream_sum": X.nbytes / median_time(lambda: K.stream_sum(flat), BANDWIDTH_REPEATS) / 1e9,
        "numpy_add_reduce": X.nbytes / median_time(lambda: np.add.reduce(flat), BANDWIDTH_REPEATS) / 1e9,
    }
    best = max(gbps.values())
    return {**gbps, "best_gbps": best, "bound_s": X.nbytes / best / 1e9}


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean fraction of shared ids per row of two (nq, k) id arrays."""
    return float(np.mean([len(set(x.tolist()) & set(y.tolist())) / a.shape[1] for x, y in zip(a, b)]))


# ---------------------------------------------------------------- public API path
def make_schema(d: int) -> type:
    class Doc(hs.Document):
        v: hs.Vector[d]

    return Doc


def time_api(X: np.ndarray, Q: np.ndarray, Qwarm: np.ndarray, kernel_ids: np.ndarray) -> dict:
    """Builds an ip DocumentArray over X; times find(vector=q, limit=10) alternately with the raw kernel."""
    t0 = time.perf_counter()
    da = hs.DocumentArray(make_schema(X.shape[1]), metric="ip")
    for s in range(0, X.shape[0], API_EXTEND_BATCH):
        da.extend({"id": str(i), "v": X[i]} for i in range(s, min(s + API_EXTEND_BATCH, X.shape[0])))
    build_s = time.perf_counter() - t0
    methods = {"kernel": ours(X, "ip"), "api": lambda q: da.find(vector=q[0], limit=TOP_K).ids}
    t, outs = bench(methods, [Q[i:i + 1] for i in range(N_SINGLE)],
                    [Qwarm[i:i + 1] for i in range(N_SINGLE_WARMUP)])
    same = np.mean([ids == [str(r) for r in row] for ids, row in zip(outs["api"], kernel_ids)])
    da.close()
    return {"build_s": build_s, "single_s": t["api"], "kernel_single_s": t["kernel"],
            "overhead_ratio": t["api"] / t["kernel"], "ids_equal_fraction": float(same)}


# ---------------------------------------------------------------- one dataset
def run_dataset(size: Size, with_api: bool) -> dict:
    X, Q, Qwarm = make_data(size)
    res = {"size": size.label, "n": size.n, "d": size.d, "normalised": size.normalise,
           "bytes": X.nbytes, "bandwidth": measure_bandwidth(X), "metrics": {}}
    for metric in ("ip", "l2", "cosine"):
        runs = run_workloads(methods_for(X, metric), Q, Qwarm)
        res["metrics"][metric] = {w: {m: t for m, (t, _) in r.items()} for w, r in runs.items()}
        if metric == "ip":
            res["overlap_vs_numpy"] = {w: overlap(r["ours"][1], r["numpy"][1]) for w, r in runs.items()}
            ip_ids = runs["single"]["ours"][1]
        if "faiss" in runs["single"]:
            res.setdefault("overlap_vs_faiss", {})[metric] = overlap(runs["batch"]["ours"][1],
                                                                     runs["batch"]["faiss"][1])
    if with_api and size.n <= API_MAX_DOCS:
        res["api"] = time_api(X, Q, Qwarm, ip_ids)
    return res


# ---------------------------------------------------------------- report
def fmt_ms(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.3f}"


def fmt_ratio(other, mine) -> str:
    return "n/a" if other is None else f"{other / mine:.2f}x"


def print_machine(facts: dict) -> None:
    print("== machine ==")
    for key in ("cpu", "cores", "cores_available", "python", "numpy", "faiss", "simd"):
        print(f"  {key:16s} {facts[key]}")
    print(f"  {'threadpools':16s} {'; '.join(facts['threadpools']) or 'none'}")
    how = "OMP/OpenBLAS/MKL=1, " + ("faiss.omp_set_num_threads(1), " if faiss else "") + "threadpool_limits(1)"
    print(f"  {'threads':16s} 1 ({how})")


def print_dataset(r: dict) -> None:
    print(f"\n== {r['n']:,} x {r['d']} float32{' (normalised)' if r['normalised'] else ''}, "
          f"{r['bytes'] / 2**20:.0f} MiB, exact top-{TOP_K}, metric ip, 1 thread ==")
    ip = r["metrics"]["ip"]
    rows = (("single query", ip["single"], 1), (f"batch {BATCH} (whole)", ip["batch"], 1),
            (f"batch {BATCH} (per query)", ip["batch"], BATCH))
    print(f"  {'workload':24s} {'ours ms':>10s} {'numpy ms':>10s} {'faiss ms':>10s} "
          f"{'numpy/ours':>11s} {'faiss/ours':>11s}")
    for name, t, div in rows:
        mine, npy, fai = t["ours"] / div, t["numpy"] / div, (t["faiss"] / div if "faiss" in t else None)
        print(f"  {name:24s} {fmt_ms(mine):>10s} {fmt_ms(npy):>10s} {fmt_ms(fai):>10s} "
              f"{fmt_ratio(npy, mine):>11s} {fmt_ratio(fai, mine):>11s}")
    bw = r["bandwidth"]
    print(f"  bandwidth bound: {bw['best_gbps']:.2f} GB/s (stream_sum {bw['stream_sum']:.2f}, "
          f"numpy {bw['numpy_add_reduce']:.2f}) -> {fmt_ms(bw['bound_s'])} ms per scan; "
          f"ours single / bound = {ip['single']['ours'] / bw['bound_s']:.2f}x")
    ov = r["overlap_vs_numpy"]
    print(f"  correctness: top-{TOP_K} id overlap ours vs numpy: single {ov['single']:.4f}, "
          f"batch {ov['batch']:.4f}"
          + "".join(f"; vs faiss {m} {v:.4f}" for m, v in r.get("overlap_vs_faiss", {}).items()))
    print(f"  other metrics (information):  {'ours ms':>10s} {'faiss ms':>10s} {'faiss/ours':>11s}")
    for metric in ("l2", "cosine"):
        for w, div in (("single", 1), ("batch", 1), ("batch/query", BATCH)):
            t = r["metrics"][metric][w.split("/")[0]]
            fai = t["faiss"] / div if "faiss" in t else None
            print(f"    {metric:6s} {w:22s} {fmt_ms(t['ours'] / div):>10s} {fmt_ms(fai):>10s} "
                  f"{fmt_ratio(fai, t['ours'] / div):>11s}")
    if "api" in r:
        a = r["api"]
        print(f"  public API: DocumentArray.find single query {fmt_ms(a['single_s'])} ms vs raw kernel "
              f"{fmt_ms(a['kernel_single_s'])} ms (timed alternately) = {a['overhead_ratio']:.2f}x "
              f"(ids equal: {a['ids_equal_fraction']:.3f}; "
              f"building {r['n']:,} docs took {a['build_s']:.1f} s)")
    elif r["n"] > API_MAX_DOCS:
        print(f"  public API: skipped (more than {API_MAX_DOCS:,} docs)")


def evaluate_targets(results: list) -> list:
    """One row per (dataset, workload, target): measured ratio and whether it passes."""
    rows = []
    for r in results:
        ip = r["metrics"]["ip"]
        for w in ("single", "batch"):
            for other, need in TARGETS:
                if other in ip[w]:
                    ratio = ip[w][other] / ip[w]["ours"]
                    rows.append({"size": r["size"], "workload": w, "target": f"ours >= {need:g}x {other}",
                                 "ratio": ratio, "pass": ratio >= need})
        ratio = ip["single"]["ours"] / r["bandwidth"]["bound_s"]
        rows.append({"size": r["size"], "workload": "single",
                     "target": f"ours within {BOUND_TARGET:g}x of bandwidth bound",
                     "ratio": ratio, "pass": ratio <= BOUND_TARGET})
        ov = min(r["overlap_vs_numpy"].values())
        rows.append({"size": r["size"], "workload": "both", "target": f"ids vs numpy >= {MIN_OVERLAP}",
                     "ratio": ov, "pass": ov >= MIN_OVERLAP})
    return rows


def print_targets(rows: list) -> None:
    print("\n== TARGETS ==")
    if faiss is None:
        print("  (faiss not available: faiss targets skipped)")
    for t in rows:
        value = f"{t['ratio']:.4f}" if t["target"].startswith("ids") else f"{t['ratio']:.2f}x"
        print(f"  [{t['size']:>12s}] {t['workload']:7s} {t['target']:40s} {value:>9s}  "
              f"{'PASS' if t['pass'] else 'MISS'}")


# ---------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help=f"small sizes {' '.join(QUICK_SIZES)}")
    p.add_argument("--sizes", nargs="+", metavar="NxD[n]", help="datasets, e.g. 1000000x128 200000x384n")
    p.add_argument("--no-api", action="store_true", help="skip the DocumentArray timing")
    p.add_argument("--json", metavar="PATH", help="also write all figures to this JSON file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    sizes = [Size.parse(s) for s in (args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES))]
    started = time.perf_counter()
    with threadpool_limits(limits=1):
        facts = machine_facts()
        print_machine(facts)
        if faiss is None:
            print(f"  faiss could not be imported ({FAISS_ERROR}): its columns are skipped")
        results = []
        for size in sizes:
            results.append(run_dataset(size, with_api=not args.no_api))
            print_dataset(results[-1])
            sys.stdout.flush()
    targets = evaluate_targets(results)
    print_targets(targets)
    wall = time.perf_counter() - started
    print(f"\ntotal wall time {wall:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": facts, "config": {"top_k": TOP_K, "batch": BATCH, "single_queries": N_SINGLE,
                                                   "batch_repeats": BATCH_REPEATS, "numpy_chunk": NUMPY_CHUNK},
                       "datasets": results, "targets": targets, "wall_s": wall}, f, indent=2)
        print(f"figures written to {args.json}")
    ok = all(t["pass"] for t in targets if t["target"].startswith("ids"))
    if not ok:
        print("CORRECTNESS CHECK FAILED: our top-10 ids differ from numpy's", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
