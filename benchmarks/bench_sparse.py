"""Sparse vectors: our exact top-k (engine SparseIndex, block-max MaxScore) beside qdrant-edge's
sparse vectors, scipy.sparse CSR exhaustive scoring (X @ q, then argpartition), our public API
(find on memory and hnsw) and, when a node is up, Elasticsearch, in one run on the same data.

SPLADE-like synthetic data: each document makes 110-230 draws from a 30,522-id vocabulary (BERT's,
as SPLADE's) with Zipf (s=1) frequencies, ~124 distinct keys after repeats merge; weights
lognormal and smaller for frequent keys (like an idf); queries hold 15-25 keys (~20) drawn with
a flatter Zipf (frequent and rare keys mixed). Every timed call goes from the query arrays to
the top-k ids, one query per call on one thread, after a warm-up; then our top_k_batch over
every core. Recall@k of every method is measured against a float64 exhaustive reference (a hit
tied with the k-th score counts), and ours (engine and public API) must be 1.0.

    python benchmarks/bench_sparse.py --quick     # 50,000 documents, 200 queries
    python benchmarks/bench_sparse.py             # 300,000 documents, 500 queries
    python benchmarks/bench_sparse.py --n 1000000 --queries 100 --out DIR   # the 1M figure of docs/benchmarks.md

Peers (--peers): scipy, qdrant-edge (raw qdrant_edge API, an optimised shard in a temporary
folder), api (our public API, find(vector={"splade": q}) on storages memory and hnsw over the
first --api-n documents, beside the engine call on those), es (Elasticsearch sparse_vector, only
when a node already answers at 127.0.0.1:9260). Every method runs over every query once per
pass, the methods taking turns over --passes passes; build times are printed too.
"""
import os
import sys
import tempfile
import time

import numpy as np

from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.engine.sparse import SparseIndex

VOCAB = 30_522  # BERT's wordpiece vocabulary, as SPLADE's
DOC_DRAWS = (110, 230)  # Zipf draws per document: ~120 distinct keys after repeats merge
QUERY_KEYS = (15, 25)  # ~20 keys per query
WARMUP = 20


def corpus(rng, n: int, vocab: int = VOCAB) -> tuple:
    """(indptr, indices, values) of n SPLADE-like documents, each row's keys ascending."""
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    lengths = rng.integers(DOC_DRAWS[0], DOC_DRAWS[1] + 1, size=n)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    keys = rng.choice(vocab, size=len(rows), p=p)
    pairs = np.unique(rows * vocab + keys)  # drops repeated keys of a row, sorts rows and keys
    rows, keys = pairs // vocab, (pairs % vocab).astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    idf = np.log1p(np.arange(1, vocab + 1)) / np.log1p(vocab)  # rank 1 -> small, rare -> ~1
    values = (rng.lognormal(0.0, 0.6, size=len(keys)) * idf[keys]).astype(np.float32)
    return indptr, keys, values


def queries(rng, nq: int, vocab: int = VOCAB) -> list:
    p = 1.0 / np.arange(1, vocab + 1) ** 0.6
    p /= p.sum()
    idf = np.log1p(np.arange(1, vocab + 1)) / np.log1p(vocab)
    out = []
    for _ in range(nq):
        keys = np.sort(rng.choice(vocab, size=int(rng.integers(QUERY_KEYS[0], QUERY_KEYS[1] + 1)), replace=False, p=p)).astype(np.int32)
        out.append((keys, (rng.lognormal(0.0, 0.6, size=len(keys)) * idf[keys]).astype(np.float32)))
    return out


def recall(got: np.ndarray, exact: np.ndarray, k: int) -> float:
    """|got ∩ true top-k| / k, a slot tied (within float32 rounding) with the k-th score counting."""
    kth = np.partition(exact, -k)[-k]
    ok = exact[got] >= kth - 1e-6 * max(abs(kth), 1e-30)
    return float(ok.sum()) / k


def timed(fn, warm: list, items: list) -> tuple:
    """(median latency s, QPS, results) of fn over items, one call each, after fn over warm."""
    for q in warm:
        fn(q)
    lat, res = [], []
    t0 = time.perf_counter()
    for q in items:
        t = time.perf_counter()
        res.append(fn(q))
        lat.append(time.perf_counter() - t)
    wall = time.perf_counter() - t0
    return float(np.median(lat)), len(items) / wall, res


def qdrant_edge_shard(folder: str, indptr, keys, values, batch: int = 2_000):
    """A qdrant-edge shard (embedded Qdrant, raw API) holding the documents as sparse vector
    "splade", point id = row; optimised (its sparse index built) before timing."""
    import qdrant_edge as q
    config = q.EdgeConfig(vectors={}, sparse_vectors={"splade": q.EdgeSparseVectorParams()})
    shard = q.EdgeShard.create(folder, config)
    n = len(indptr) - 1
    for a in range(0, n, batch):
        b = min(n, a + batch)
        pts = [q.Point(i, {"splade": q.SparseVector(keys[indptr[i]:indptr[i + 1]].tolist(),
                                                    values[indptr[i]:indptr[i + 1]].tolist())})
               for i in range(a, b)]
        shard.update(q.UpdateOperation.upsert_points(pts))
    shard.optimize()
    return shard


def qdrant_edge_top(shard, k: int):
    """One query of the shard by its sparse vector: top-k point ids (rows), best first."""
    import qdrant_edge as q

    def top(query):
        req = q.QueryRequest(limit=k, query=q.Query.Nearest(q.SparseVector(query[0].tolist(), query[1].tolist()),
                                                            using="splade"), with_payload=False, with_vector=False)
        return np.array([p.id for p in shard.query(req)], dtype=np.int64)
    return top


ES_URL, ES_INDEX = "http://127.0.0.1:9260", "bench-sparse"


def es_up() -> bool:
    """Whether an Elasticsearch node answers at ES_URL (never started here)."""
    try:
        from elasticsearch import Elasticsearch
        # cluster health, not ping: the test node may refuse GET /
        return Elasticsearch(ES_URL, request_timeout=3).cluster.health()["status"] in ("green", "yellow")
    except Exception:
        return False


def es_index(indptr, keys, values, batch: int = 2_000):
    """The documents in a fresh ES index as a `sparse_vector` field (feature = str(key)), _id =
    row, bulk-loaded, refreshed and force-merged to one segment before timing."""
    from elasticsearch import Elasticsearch
    es = Elasticsearch(ES_URL, request_timeout=600)
    es.indices.delete(index=ES_INDEX, ignore_unavailable=True)
    es.indices.create(index=ES_INDEX, mappings={"properties": {"splade": {"type": "sparse_vector"}}},
                      settings={"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1"})
    n = len(indptr) - 1
    for a in range(0, n, batch):
        ops = []
        for i in range(a, min(n, a + batch)):
            ops.append({"index": {"_id": str(i)}})
            ops.append({"splade": {str(int(t)): float(w) for t, w in zip(keys[indptr[i]:indptr[i + 1]],
                                                                           values[indptr[i]:indptr[i + 1]])}})
        r = es.bulk(index=ES_INDEX, operations=ops)
        if r.get("errors"):
            raise RuntimeError(f"ES bulk: {next(x for x in r['items'] if 'error' in x['index'])}")
    es.indices.refresh(index=ES_INDEX)
    es.indices.forcemerge(index=ES_INDEX, max_num_segments=1)
    return es


def es_top(es, k: int):
    def top(query):
        qv = {str(int(t)): float(w) for t, w in zip(query[0], query[1])}
        r = es.search(index=ES_INDEX, size=k, source=False,
                      query={"sparse_vector": {"field": "splade", "query_vector": qv}})
        return np.array([int(h["_id"]) for h in r["hits"]["hits"]], dtype=np.int64)
    return top


def api_collection(storage: str, indptr, keys, values, batch: int = 50_000):
    """A public-API collection (hs.DocumentArray on `storage`) of the rows as a SparseVector
    field "splade", id = str(row), filled by extend_columns in batches of (indices, values)."""
    import hybridsearch as hs

    class Doc(hs.Document):
        splade: hs.SparseVector = {}

    da = hs.DocumentArray(Doc, storage=storage)
    n = len(indptr) - 1
    for a in range(0, n, batch):
        b = min(n, a + batch)
        da.extend_columns({"id": [str(i) for i in range(a, b)],
                           "splade": [(keys[indptr[i]:indptr[i + 1]], values[indptr[i]:indptr[i + 1]])
                                      for i in range(a, b)]})
    return da


def api_top(da, k: int):
    def top(query):
        return np.array([int(d.id) for d in da.find(vector={"splade": query}, limit=k)], dtype=np.int64)
    return top


def interleaved(methods: dict, warm: list, items: list, passes: int) -> dict:
    """name -> (median latency s over every call of every pass, median over passes of the
    pass's QPS, results of the last pass): every method runs over `items` once per pass, the
    methods taking turns (so a burst of load from other jobs falls on all of them alike)."""
    for fn in methods.values():
        for q in warm:
            fn(q)
    lat = {name: [] for name in methods}
    qps = {name: [] for name in methods}
    res = {}
    for _ in range(passes):
        for name, fn in methods.items():
            out = []
            t0 = time.perf_counter()
            for q in items:
                t = time.perf_counter()
                out.append(fn(q))
                lat[name].append(time.perf_counter() - t)
            qps[name].append(len(items) / (time.perf_counter() - t0))
            res[name] = out
    return {name: (float(np.median(lat[name])), float(np.median(qps[name])), res[name]) for name in methods}


def recalls(results: dict, X64, items: list, k: int) -> dict:
    """name -> per-query recall@k against float64 exhaustive scores over X64's rows."""
    rec = {name: [] for name in results}
    for i, q in enumerate(items):
        dense = np.zeros(X64.shape[1])
        dense[q[0]] = q[1].astype(np.float64)
        exact = X64 @ dense
        for name, (_, _, res) in results.items():
            rec[name].append(recall(np.asarray(res[i]), exact, k))
    return rec


def build_index(indptr, keys, values, step: int = 50_000) -> SparseIndex:
    index = SparseIndex()
    n = len(indptr) - 1
    for a in range(0, n, step):
        b = min(n, a + step)
        index.add(np.arange(a, b, dtype=np.int64), indptr[a:b + 1] - indptr[a], keys[indptr[a]:indptr[b]],
                  values[indptr[a]:indptr[b]])
    return index


def main(argv=None) -> int:
    ap = parser(__doc__, full=(300_000, 500), quick=(50_000, 200), what="documents")
    ap.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--passes", type=int, default=3, help="interleaved timed passes, medians (default 3)")
    ap.add_argument("--peers", default="scipy,qdrant-edge,api",
                    help="comma list among scipy, qdrant-edge, api (our public API on memory and hnsw), es (Elasticsearch "
                         "sparse_vector at 127.0.0.1:9260 if a node is already up; never started here)")
    ap.add_argument("--api-n", type=int, default=20_000,
                    help="documents in the public-API collections, the first of the corpus (default 20,000: "
                         "their ingest runs ~0.5-1 ms per document)")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    k = args.k
    peers = set(args.peers.split(",")) - {""}
    out, facts = start("sparse", args)
    out.say(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    import scipy
    import scipy.sparse as sp

    rng = np.random.default_rng(args.seed)
    t = time.perf_counter()
    indptr, keys, values = corpus(rng, n)
    qs = queries(rng, nq + WARMUP)
    out.say(f"data: {n:,} documents, {len(keys):,} non-zeros ({len(keys) / n:.0f} per document), vocabulary "
            f"{VOCAB:,}; {nq:,} queries of {np.mean([len(q[0]) for q in qs]):.0f} keys, k={k} "
            f"(made in {time.perf_counter() - t:.1f} s); scipy {scipy.__version__}")

    builds = {}
    t = time.perf_counter()
    index = build_index(indptr, keys, values)
    builds["ours: SparseIndex.add"] = time.perf_counter() - t
    t = time.perf_counter()
    X = sp.csr_matrix((values, keys, indptr), shape=(n, VOCAB))
    builds["scipy CSR"] = time.perf_counter() - t
    st = index.stats()
    out.say(f"index: ours {st['nbytes'] / 2**20:,.0f} MiB, scipy CSR "
            f"{(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20:,.0f} MiB")

    def ours(q):
        return index.top_k(q[0], q[1], k)[1]

    def ours_exhaustive(q):  # same kernel, pruning off: every posting of the query's keys
        return index.top_k(q[0], q[1], k, prune=False)[1]

    def scipy_top(q):
        dense = np.zeros(VOCAB, dtype=np.float32)
        dense[q[0]] = q[1]
        scores = X @ dense
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    OURS = "ours: engine SparseIndex.top_k (block-max MaxScore)"
    methods = {OURS: ours, "ours: engine, pruning off": ours_exhaustive}
    if "scipy" in peers:
        methods["scipy CSR X @ q + argpartition"] = scipy_top
    tmp = tempfile.TemporaryDirectory(prefix="bench_sparse_")
    if "qdrant-edge" in peers:
        from importlib.metadata import version
        t = time.perf_counter()
        shard = qdrant_edge_shard(os.path.join(tmp.name, "qdrant"), indptr, keys, values)
        builds[f"qdrant-edge {version('qdrant-edge-py')} (upserts + optimize)"] = time.perf_counter() - t
        methods["qdrant-edge (raw API, sparse vector)"] = qdrant_edge_top(shard, k)
    es = None
    if "es" in peers:
        if es_up():
            t = time.perf_counter()
            es = es_index(indptr, keys, values)
            version = next(iter(es.nodes.info(filter_path="nodes.*.version")["nodes"].values()))["version"]
            builds[f"Elasticsearch {version} sparse_vector (bulk + refresh + forcemerge)"] = \
                time.perf_counter() - t
            methods["Elasticsearch sparse_vector query (HTTP, 1 shard)"] = es_top(es, k)
        else:
            out.say(f"Elasticsearch: no node at {ES_URL}, left out (this script never starts one)")
    results = interleaved(methods, qs[:WARMUP], qs[WARMUP:], args.passes)
    if es is not None:
        es.indices.delete(index=ES_INDEX, ignore_unavailable=True)
    rec = recalls(results, X.astype(np.float64), qs[WARMUP:], k)

    api_n = min(n, args.api_n)
    api_results, api_rec = {}, {}
    if "api" in peers:
        sub = indptr[:api_n + 1]
        small = index if api_n == n else build_index(sub, keys[:sub[-1]], values[:sub[-1]])
        api_methods = {f"ours: engine top_k at {api_n:,} (same call as above)":
                       (lambda q: small.top_k(q[0], q[1], k)[1])}
        for storage in ("memory", "hnsw"):
            t = time.perf_counter()
            da = api_collection(storage, sub, keys, values)
            builds[f"ours: public API extend_columns, storage {storage}, {api_n:,} documents"] = time.perf_counter() - t
            api_methods[f"ours: public API find(vector={{'splade': q}}), {storage}"] = api_top(da, k)
        api_results = interleaved(api_methods, qs[:WARMUP], qs[WARMUP:], args.passes)
        api_rec = recalls(api_results, X[:api_n].astype(np.float64), qs[WARMUP:], k)

    out.say("build (one thread where the library allows):")
    out.table(["what", "seconds", "documents / s"],
              [[name, fmt(s, 2), fmt((api_n if "public API" in name else n) / s)] for name, s in builds.items()])
    peer_names = [m for m in results if not m.startswith("ours")]
    best_peer = max(peer_names, key=lambda m: results[m][1]) if peer_names else None
    rows = []
    for name, (med, qps, _) in results.items():
        rows.append([name, f"{med * 1e3:.3f}", fmt(qps), f"{np.mean(rec[name]):.4f}", f"{min(rec[name]):.2f}",
                     ratio(results[OURS][1], qps)])
    out.say(f"\n{n:,} documents, 1 thread, 1 query per call, {args.passes} interleaved passes (QPS: median of the "
            f"passes; latency: median of every call):")
    out.table(["method", "median ms", "QPS", "recall@k", "min recall", "ours QPS / its QPS"], rows)
    if api_results:
        base = next(iter(api_results))
        out.say(f"\nthe public API on the first {api_n:,} documents, beside the engine call on the same documents:")
        out.table(["method", "median ms", "QPS", "recall@k", "min recall", "vs engine call"],
                  [[name, f"{med * 1e3:.3f}", fmt(qps), f"{np.mean(api_rec[name]):.4f}", f"{min(api_rec[name]):.2f}",
                    ratio(qps, api_results[base][1])] for name, (med, qps, _) in api_results.items()])
    work = [index.work(q[0], q[1], k) / max(1, index.work(q[0], q[1], k, prune=False)) for q in qs[WARMUP:WARMUP + 50]]
    out.say(f"postings read by ours / by the exhaustive evaluation: median {np.median(work):.3f} "
            f"(mean {np.mean(work):.3f}) over 50 queries")

    threads = os.cpu_count() or 1
    batch = qs[WARMUP:]
    index.top_k_batch(batch[:WARMUP], k, threads=threads)
    t = time.perf_counter()
    _, bslots = index.top_k_batch(batch, k, threads=threads)
    tb = time.perf_counter() - t
    same = all(np.array_equal(bslots[i], results[OURS][2][i]) for i in range(len(batch)))
    out.say(f"ours top_k_batch, {threads} threads: {len(batch) / tb:,.0f} QPS ({'same hits as one by one' if same else 'DIFFERENT hits from one by one'})")
    ours_exact = [min(rec[OURS]) == 1.0] + [min(r) == 1.0 for name, r in api_rec.items()]
    ok = all(ours_exact) and same
    out.say(f"recall of ours (engine and public API) is {'1.0 on every query' if ok else 'BELOW 1.0 (a bug)'}")
    if best_peer:
        q_ratio = results[OURS][1] / results[best_peer][1]
        out.say(f"target: ours >= 3x the best peer's QPS; best peer {best_peer}: ratio {q_ratio:.2f}x -> "
                f"{'MET' if q_ratio >= 3 else 'MISSED'}")
    out.say(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    tmp.cleanup()
    out.save({"n": n, "queries": nq, "k": k, "machine": facts, "api_n": api_n, "build_s": builds,
              "rows": {name: {"median_s": r[0], "qps": r[1], "recall": float(np.mean(rec[name]))}
                       for name, r in results.items()},
              "api_rows": {name: {"median_s": r[0], "qps": r[1], "recall": float(np.mean(api_rec[name]))}
                           for name, r in api_results.items()},
              "batch_qps": len(batch) / tb, "work_ratio_median": float(np.median(work))})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
