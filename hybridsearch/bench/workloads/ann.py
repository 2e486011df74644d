"""Approximate nearest neighbours: recall@k against exact ground truth next to single-thread QPS
over an ef sweep, and filtered search at several selectivities, for indexes built side by side
in one process and timed round-robin (every index's pass 1, then every index's pass 2, ...) so
that load from elsewhere on a shared machine falls on all of them alike."""
from __future__ import annotations

import numpy as np

from hybridsearch.bench import vectors as V
from hybridsearch.bench.adapters.anchors import FaissHnsw, Hnswlib, cpu_count
from hybridsearch.bench.adapters.base import GraphConfig, VectorAdapter
from hybridsearch.bench.adapters.databases import DATABASES, vector_adapter
from hybridsearch.bench.adapters.ours import Collection, Graph
from hybridsearch.bench.metrics import mean_recall
from hybridsearch.bench.timing import interleaved, round_robin

RAW = {"hnswlib-raw": lambda tmp, o: Hnswlib(), "faiss-raw": lambda tmp, o: FaissHnsw(),
       "ours-raw": lambda tmp, o: Graph("none"), "ours-raw-int8": lambda tmp, o: Graph("int8")}
RAW_MODULES = {"hnswlib-raw": "hnswlib", "faiss-raw": "faiss"}
WARMUP = 20  # queries before every timed segment of a sweep, unless held-out warm-up queries are given  # raw indexes of optional libraries
RAW.update({db: (lambda tmp, o, db=db: vector_adapter(db)) for db in DATABASES})  # the `[anchors]` rows


def adapter(name: str, tmp: str = "/tmp", **options) -> VectorAdapter:
    """The index called `name`: a raw one of RAW, else a DocumentArray on the storage `name`
    (options go to the storage)."""
    if name in RAW:
        return RAW[name](tmp, options)
    return Collection(storage=name, name=name, tmp=tmp, **options)


def build_all(names: list, X: np.ndarray, bucket: np.ndarray | None, metric: str, cfg: GraphConfig,
              tmp: str = "/tmp", log=None, **options) -> tuple:
    """(built adapters, name -> why it failed): each index built on the same data in turn."""
    built, failed = [], {}
    for name in names:
        a = adapter(name, tmp, **options)
        try:
            a.build_timed(X, bucket, metric, cfg)
        except Exception as e:  # noqa: BLE001 -- report it, and measure the others
            failed[name] = f"build failed: {type(e).__name__}: {e}"
            continue
        if log:
            log(f"  built {a.label} in {a.build_s:.1f} s")
        built.append(a)
    return built, failed


def _timed(searchers: dict, rows: dict, nq: int, nwarm: int, passes: int) -> dict:
    """round_robin of each searcher over its owner's query rows: rows[owner] holds the timed
    queries then the warm-up ones (warm-up on the first fifth of the timed ones when nwarm is 0)."""
    fns = {name: s for name, (s, _) in searchers.items()}
    items = {name: rows[owner][:nq] for name, (_, owner) in searchers.items()}
    warmup = {name: rows[owner][nq:nq + nwarm] for name, (_, owner) in searchers.items()} if nwarm else None
    return round_robin(fns, items, warmup, passes, keep=True)


def sweep(adapters: list, X: np.ndarray, Q: np.ndarray, gt: np.ndarray, metric: str, efs, k: int = 10,
          passes: int = 3, Qwarm: np.ndarray | None = None, log=None, min_seconds: float = 0.0,
          loadavg=None) -> dict:
    """name -> [{"ef", "recall", "qps" (median over passes), "qps_min", "qps_max", "qps_q1",
    "qps_q3", "qps_passes", "p50_ms", "p99_ms", "load1"} or {"ef", "error"}] over the ef sweep;
    one query per call on one thread; the passes interleaved engine by engine (A's whole sweep,
    B's, A's, ...: timing.interleaved, each segment at least `min_seconds`, `loadavg` read
    before each); warm-up on Qwarm (held-out queries) or the first WARMUP queries of Q before
    every segment."""
    A = Q if Qwarm is None else np.vstack([Q, Qwarm])
    rows = {a.name: a.rows(A) for a in adapters}
    nq = len(Q)
    items = {a.name: rows[a.name][:nq] for a in adapters}
    if Qwarm is None:  # a few queries bring an engine's pages back after another's sweep; a slow one pays per query
        warm = {a.name: rows[a.name][:max(1, min(WARMUP, nq // 5))] for a in adapters}
    else:
        warm = {a.name: rows[a.name][nq:] for a in adapters}
    makers = {a.name: (lambda ef, a=a: a.searcher(k, ef)) for a in adapters}
    timed = interleaved(makers, list(efs), items, warm, passes, min_seconds, loadavg)
    curves: dict = {}
    for a in adapters:
        curves[a.name] = []
        for ef, t in zip(efs, timed[a.name]):
            if "error" in t:
                curves[a.name].append({"ef": ef, "error": t["error"]})
                continue
            recall, _ = mean_recall(X, Q, [a.ids(o) for o in t.pop("out")], gt, metric, k)
            curves[a.name].append({"ef": ef, "recall": recall, **t})
    if log:
        for ef_i, ef in enumerate(efs):
            log(f"  ef={ef}: " + ", ".join(f"{n} {c[ef_i]['recall']:.3f}/{c[ef_i]['qps']:,.0f} qps"
                                          if "qps" in c[ef_i] else f"{n} error" for n, c in curves.items()))
    return curves


def filtered(adapters: list, X: np.ndarray, Q: np.ndarray, bucket: np.ndarray, metric: str, pcts, ef: int,
             k: int = 10, passes: int = 3, Qwarm: np.ndarray | None = None, cache=None, log=None,
             count: int = V.N_BUCKETS) -> dict:
    """pct -> {"matches", "results": variant -> {"recall", "qps", "violations", "plan", "short"} or
    {"error"}} for `bucket < t` filters matching ~pct percent of the rows (`bucket` uniform in
    [0, count)); recall against the exact top-k among the matching rows; `violations`: returned
    ids the filter excludes; `short`: queries answered with fewer than min(k, matches) hits."""
    A = Q if Qwarm is None else np.vstack([Q, Qwarm])
    rows = {a.name: a.rows(A) for a in adapters}
    nwarm = 0 if Qwarm is None else len(Qwarm)
    out = {}
    for pct in pcts:
        query, sel = V.below(bucket, pct, count)
        gt, _ = V.ground_truth(X, Q, k, metric, cache, bits=sel.bits)
        searchers, owner = {}, {}
        for a in adapters:
            for variant, mode in a.variants().items():
                searchers[variant] = (a.searcher(k, ef, sel, query, mode), a.name)
                owner[variant] = a
        res = {}
        for variant, t in _timed(searchers, rows, len(Q), nwarm, passes).items():
            if "error" in t:
                res[variant] = {"error": t["error"]}
                continue
            a = owner[variant]
            found = [a.ids(o) for o in t["out"]]
            recall, bad = mean_recall(X, Q, found, gt, metric, k, allowed=sel.mask)
            want = min(k, int(sel.mask.sum()))
            short = sum(1 for f in found if int((f >= 0).sum()) < want)
            res[variant] = {"recall": recall, "qps": t["qps"], "violations": bad, "short": short,
                            "p99_ms": t["p99_ms"], "plan": a.plan(k, ef, Q[0], query)}
        out[pct] = {"matches": int(sel.mask.sum()), "results": res}
        if log:
            log(f"  filter {pct}%: " + ", ".join(f"{v} {r['recall']:.3f}/{r['qps']:,.0f} qps" if "qps" in r
                                                else f"{v} error" for v, r in res.items()))
    return out


def group(names: list, X: np.ndarray, Q: np.ndarray, gt: np.ndarray, m: int, efc: int, efs, metric: str,
          tmp: str, passes: int = 3, min_seconds: float = 0.0) -> list:
    """The harness's recall-vs-QPS rows for indexes built in this one process (run it in a child):
    [{"storage", "label" (what is timed), "kind" ("api": through a library's API, e.g. find();
    "raw": a bare index call), "m", "ef_construct", "build_s", "points"}] or [{"storage", "error"}];
    the sweeps interleaved over `passes` passes (see sweep)."""
    cfg = GraphConfig(m=m, ef_construct=efc, threads=cpu_count())
    built, failed = build_all(names, X, None, metric, cfg, tmp, ef=max(efs))
    curves = sweep(built, X, Q, gt, metric, efs, passes=passes, min_seconds=min_seconds)
    rows = [{"storage": a.name, "label": a.label, "kind": a.kind, "m": m, "ef_construct": efc, "build_s": a.build_s,
             "points": curves[a.name]} for a in built] + [{"storage": n, "error": why} for n, why in failed.items()]
    for a in built:
        a.close()
    return rows


def compare(dataset: str, n: int, nq: int, names: list, cfg: GraphConfig, efs, filter_ef: int, pcts=(1, 10, 50),
            passes: int = 3, nwarm: int = 100, tmp: str = "/tmp", log=None) -> dict:
    """Everything the HNSW comparison reports for one dataset ("sift", "emb" or "glove", see
    vectors.GENERATORS): the indexes built side by side (build seconds, RSS growth, graph bytes),
    the ef sweep and the filtered searches on one thread, warmed on `nwarm` held-out queries."""
    from threadpoolctl import threadpool_limits
    gen, metric = V.GENERATORS[dataset]
    X, Qall = gen(n, nq + nwarm)
    n = len(X)  # a real set (glove) may hold fewer rows than asked for
    Q, Qwarm = Qall[:nq], Qall[nq:]
    bucket = V.buckets(n)
    gt, _ = V.ground_truth(X, Q, 10, metric)
    built, failed = build_all(names, X, bucket, metric, cfg, tmp, log=log)
    with threadpool_limits(limits=1):
        curves = sweep(built, X, Q, gt, metric, efs, passes=passes, Qwarm=Qwarm, log=log)
        filt = filtered(built, X, Q, bucket, metric, pcts, filter_ef, passes=passes, Qwarm=Qwarm, log=log)
    engines = {a.name: {"label": a.label, "build_s": a.build_s, "rss_delta": a.rss_delta,
                        "graph_bytes": a.graph_bytes, "note": a.note} for a in built}
    for a in built:
        a.close()
    return {"dataset": dataset, "n": n, "d": int(X.shape[1]), "metric": metric, "queries": nq,
            "vector_bytes": int(X.nbytes), "failed": failed, "engines": engines, "sweep": curves,
            "filtered": filt, "filter_ef": filter_ef}
