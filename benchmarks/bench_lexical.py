"""Lexical BM25 benchmark: ours (DocumentArray) vs bm25s vs tantivy, side by side in one run.

Corpus (fixed seed): N synthetic products, a title of ~12 words and a description of
~40 words drawn from a Zipfian vocabulary (exponent 1.07) of 50,000 distinct
pronounceable pseudo-words: 85% are fresh stems, 15% are a stem plus an English
ending (-s, -ing, -ed, -er, -ly), so Snowball stemming merges some of them (50,000
words -> ~43,000 stems: it matters a little). Each product also has a keyword
``category`` (20 values) and a clustered 64-d vector, for the hybrid rows.
Queries: 3-8 consecutive words of a random title (so they hit), each with a query
vector from the same clusters; the warm-up uses separate queries.

Analysis is the same everywhere: words, lowercase, English Snowball (ours and bm25s
through PyStemmer, tantivy's ``en_stem``), no stop words. Scoring is BM25 with
k1=1.2, b=0.75 and Lucene's idf in every engine, but over different fields:

* ours: ``hs.DocumentArray(Product, storage="memory")`` with title and description as
  two ``hs.Text`` fields; ``find(text=q, limit=10)`` scores a document by its best
  field (Elasticsearch ``multi_match`` ``best_fields``). The main row: the targets
  are judged on it. ``storage="hnsw"`` is measured too (same calls; its index time
  includes building the HNSW graph over the vectors, on all cores).
  ``ours-1f``: title + " " + description as ONE ``hs.Text`` field (no vector): the
  same work as bm25s, so their overlap checks our BM25 against an independent one.
* bm25s: single-field only, so it indexes title + " " + description;
  ``method="lucene"``, PyStemmer, no stop words. ``retrieve`` one query per call with
  ``n_threads=0`` (sequential: ``n_threads=1`` starts a thread pool per call) is the
  comparable figure; batched ``retrieve`` of all queries (tokenising included) on one
  thread and on all cores is reported next to it. bm25s' numba backend is not used.
* tantivy: title and description as two ``en_stem`` text fields plus an integer id
  (stored, fast); indexed on all cores (reported), committed, merged and reloaded
  before searching. ``index.parse_query(q, ["title", "description"])`` is a disjunction
  over both fields whose scores add up per document (not the best field);
  ``search(query, 10, count=False)`` (the default ``count=True`` also counts every
  match, which defeats top-k pruning: reported as its own row), ids read with
  ``fast_field_values``. ``tantivy-dismax``: ``Query.disjunction_max_query`` of the
  per-field queries, i.e. best field, the same semantics as ours (info row).
  Queries are reduced to their words before parsing: tantivy's query language
  gives meaning to ``- + : ^ * " ( ) [ ]`` and to upper-case AND/OR/NOT/IN
  (``foo-bar`` becomes a phrase query, ``it's`` a syntax error, ``-x`` an exclusion).

Every timed call goes from the query string to the top-10 ids (what an application
needs). Single-thread QPS: one query per call in a Python loop, under
``threadpool_limits(1)``, a warm-up first, then 3 passes over all queries round-robin
over the engines; the median pass gives QPS, all timed calls give p50/p99 latency,
and CPU/wall (process CPU time over wall time) shows how many cores a call used.
Overlap@10 between two engines: |A & B| / min(10, |A|, |B|), averaged over queries.

Run from the repository root:

    python benchmarks/bench_lexical.py --quick     # 20,000 documents, 200 queries
    python benchmarks/bench_lexical.py             # 200,000 documents, 1,000 queries
    python benchmarks/bench_lexical.py --n 50000 --queries 500 --json out.json
"""
import argparse
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
from importlib import metadata

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import hybridsearch as hs
from machine import cpu_model  # benchmarks/machine.py (the script's own folder is on sys.path)

try:
    import bm25s
    import Stemmer
    BM25S_ERROR = None
except ImportError as exc:  # optional: its rows are skipped
    bm25s, BM25S_ERROR = None, f"{exc} (pip install bm25s PyStemmer)"
try:
    import tantivy
    TANTIVY_ERROR = None
except ImportError as exc:
    tantivy, TANTIVY_ERROR = None, f"{exc} (pip install tantivy)"

SEED = 20240607
TOP_K = 10
VOCAB = 50_000
ZIPF = 1.07
TITLE_WORDS, DESC_WORDS = 12, 40
N_CATEGORIES = 20
DIM, N_CENTRES = 64, 50
FILTER = {"category": "c3"}
REPEATS = 3
N_WARMUP = 100
FULL = {"n": 200_000, "queries": 1000}
QUICK = {"n": 20_000, "queries": 200}
QPS_VS_TANTIVY = 1.0               # ours QPS / tantivy QPS, at least
QPS_VS_BM25S = 3.0                 # ours QPS / bm25s single-query QPS, at least
INDEX_VS_TANTIVY = 1.0             # ours index time / tantivy's, at most


class Product(hs.Document):
    title: hs.Text
    description: hs.Text
    category: hs.Keyword
    embedding: hs.Vector[DIM]


class OneField(hs.Document):
    text: hs.Text


# ---------------------------------------------------------------- data
def make_vocab(rng) -> list:
    """VOCAB distinct pseudo-words; 15% are an earlier stem plus an English ending."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + [c + v + "n" for c in "klmrst" for v in "aeiou"]
    endings = ("s", "ing", "ed", "er", "ly")
    words, seen, stems = [], set(), []
    while len(words) < VOCAB:
        if stems and rng.random() < 0.15:
            w = stems[rng.integers(len(stems))] + endings[rng.integers(len(endings))]
        else:
            w = "".join(syllables[j] for j in rng.integers(0, len(syllables), rng.integers(2, 5)))
            if w not in seen:
                stems.append(w)
        if w not in seen:
            seen.add(w)
            words.append(w)
    return [words[i] for i in rng.permutation(VOCAB)]  # Zipf ranks independent of how a word was made


def make_corpus(n: int, nq: int):
    """(docs as dicts, queries, query vectors); the first N_WARMUP queries are the warm-up set."""
    rng = np.random.default_rng(SEED)
    words = make_vocab(rng)
    p = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF
    p /= p.sum()
    title = rng.choice(VOCAB, (n, TITLE_WORDS), p=p)
    desc = rng.choice(VOCAB, (n, DESC_WORDS), p=p)
    centres = rng.standard_normal((N_CENTRES, DIM)).astype(np.float32)
    vecs = centres[rng.integers(0, N_CENTRES, n)] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    cat = rng.integers(0, N_CATEGORIES, n)
    docs = [{"id": str(i), "title": " ".join([words[j] for j in title[i].tolist()]),
             "description": " ".join([words[j] for j in desc[i].tolist()]),
             "category": f"c{cat[i]}", "embedding": vecs[i]} for i in range(n)]
    total = nq + N_WARMUP
    queries = []
    for _ in range(total):
        t = title[rng.integers(n)].tolist()
        length = int(rng.integers(3, 9))
        start = int(rng.integers(0, TITLE_WORDS - length + 1))
        queries.append(" ".join(words[j] for j in t[start: start + length]))
    qvecs = centres[rng.integers(0, N_CENTRES, total)] + 0.5 * rng.standard_normal((total, DIM)).astype(np.float32)
    return docs, queries, qvecs


# ---------------------------------------------------------------- engines
class Unavailable(Exception):
    """The engine cannot be measured on this install (the reason is the message)."""


class Engine:
    name = label = note = ""
    main = False

    def build(self, docs):
        raise NotImplementedError

    def searchers(self, queries, qvecs) -> dict:
        """variant name -> fn(i) returning the top-10 ids (as ints) of query i."""
        raise NotImplementedError


class Ours(Engine):
    def __init__(self, storage):
        self.storage = storage
        self.name = "ours" if storage == "memory" else f"ours-{storage}"
        self.label = f"ours (storage={storage!r}, 2 fields, best field)"
        self.main = storage == "memory"
        self.note = "1 thread" if storage == "memory" else "incl. HNSW graph of the vectors, all cores"

    def build(self, docs):
        try:
            self.da = hs.DocumentArray(Product, storage=self.storage)
            self.da.extend(docs)
        except hs.UnsupportedError as exc:
            raise Unavailable(str(exc)) from exc

    def searchers(self, queries, qvecs):
        da = self.da
        return {self.name: lambda i: [int(x) for x in da.find(text=queries[i], limit=TOP_K).ids]}

    def hybrid(self, queries, qvecs):
        da, tag = self.da, self.storage
        return {
            f"{tag}: text + vector, sum": lambda i: da.find(text=queries[i], vector=qvecs[i], limit=TOP_K).ids,
            f"{tag}: text + vector, rrf": lambda i: da.find(text=queries[i], vector=qvecs[i], fusion="rrf",
                                                            limit=TOP_K).ids,
            f"{tag}: text + vector, sum, category filter": lambda i: da.find(
                text=queries[i], vector=qvecs[i], filter=FILTER, limit=TOP_K).ids,
            f"{tag}: text, category filter": lambda i: da.find(text=queries[i], filter=FILTER, limit=TOP_K).ids,
        }


class OursOneField(Engine):
    name = "ours-1f"
    label = "ours (storage='memory', 1 field)"
    note = "title + ' ' + description, no vector, 1 thread"

    def build(self, docs):
        try:
            self.da = hs.DocumentArray(OneField, storage="memory")
            self.da.extend([{"id": d["id"], "text": d["title"] + " " + d["description"]} for d in docs])
        except hs.UnsupportedError as exc:
            raise Unavailable(str(exc)) from exc

    def searchers(self, queries, qvecs):
        da = self.da
        return {self.name: lambda i: [int(x) for x in da.find(text=queries[i], limit=TOP_K).ids]}


class Bm25s(Engine):
    name = "bm25s"
    label = "bm25s (1 field, method='lucene')"
    note = "title + ' ' + description (single-field library), 1 thread"

    def build(self, docs):
        if bm25s is None:
            raise Unavailable(BM25S_ERROR)
        self.stemmer = Stemmer.Stemmer("english")
        corpus = [d["title"] + " " + d["description"] for d in docs]
        tokens = bm25s.tokenize(corpus, stopwords=None, stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        self.retriever.index(tokens, show_progress=False)

    def tokens(self, texts):
        return bm25s.tokenize(texts, stopwords=None, stemmer=self.stemmer, show_progress=False)

    def searchers(self, queries, qvecs):
        r = self.retriever

        def one(i):
            docs, _ = r.retrieve(self.tokens([queries[i]]), k=TOP_K, show_progress=False, n_threads=0)
            return docs[0].tolist()
        return {self.name: one}

    def batched(self, queries, threads: int) -> list:
        docs, _ = self.retriever.retrieve(self.tokens(queries), k=TOP_K, show_progress=False, n_threads=threads)
        return docs


_QUERY_WORD = re.compile(r"[^\W_]+")


def tantivy_query_text(q: str) -> str:
    """The words of q, lower-cased, space-separated: nothing left for tantivy's query parser to
    read as syntax (- + : ^ * " ( ) [ ] ~ ! or upper-case AND/OR/NOT/IN). Same words as ours sees."""
    return " ".join(_QUERY_WORD.findall(q.lower()))


class Tantivy(Engine):
    name = "tantivy"
    label = "tantivy (2 fields, summed)"

    def __init__(self, threads):
        self.threads = threads
        self.note = f"en_stem, {threads} indexing threads"

    def build(self, docs):
        if tantivy is None:
            raise Unavailable(TANTIVY_ERROR)
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("title", stored=False, tokenizer_name="en_stem")
        sb.add_text_field("description", stored=False, tokenizer_name="en_stem")
        sb.add_integer_field("id", stored=True, indexed=True, fast=True)
        self.index = tantivy.Index(sb.build())
        writer = self.index.writer(heap_size=256_000_000 * self.threads, num_threads=self.threads)
        for d in docs:
            writer.add_document(tantivy.Document(id=int(d["id"]), title=d["title"], description=d["description"]))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.note += f", {self.searcher.num_segments} segment(s)"

    def ids(self, result) -> list:
        addrs = [a for _, a in result.hits]
        if hasattr(self.searcher, "fast_field_values"):
            return self.searcher.fast_field_values("id", addrs)
        return [self.searcher.doc(a)["id"][0] for a in addrs]  # older tantivy-py: stored field

    def searchers(self, queries, qvecs):
        index, s = self.index, self.searcher
        fields = ["title", "description"]

        def summed(i):
            q = index.parse_query(tantivy_query_text(queries[i]), fields)
            return self.ids(s.search(q, TOP_K, count=False))

        def counted(i):
            return self.ids(s.search(index.parse_query(tantivy_query_text(queries[i]), fields), TOP_K))

        def dismax(i):
            text = tantivy_query_text(queries[i])
            q = tantivy.Query.disjunction_max_query([index.parse_query(text, [f]) for f in fields])
            return self.ids(s.search(q, TOP_K, count=False))
        out = {"tantivy": summed, "tantivy count=True": counted}
        if hasattr(tantivy.Query, "disjunction_max_query"):
            out["tantivy-dismax"] = dismax
        return out


VARIANT_LABELS = {
    "tantivy": "tantivy: parse_query, count=False",
    "tantivy count=True": "tantivy: the same, count=True (default)",
    "tantivy-dismax": "tantivy-dismax: best field (= ours)",
}


# ---------------------------------------------------------------- timing
def time_round_robin(fns: dict, timed: list, warmup: list, repeats: int) -> dict:
    """name -> {qps, p50_ms, p99_ms, cpu_per_wall}: passes interleaved over the engines, median pass."""
    for f in fns.values():
        for i in warmup:
            f(i)
    walls = {n: [] for n in fns}
    cpus = {n: [] for n in fns}
    lat = {n: [] for n in fns}
    gc.collect()
    for _ in range(repeats):
        for n, f in fns.items():
            pc = time.perf_counter
            c0, t0 = time.process_time(), pc()
            for i in timed:
                t = pc()
                f(i)
                lat[n].append(pc() - t)
            walls[n].append(pc() - t0)
            cpus[n].append(time.process_time() - c0)
    out = {}
    for n in fns:
        wall = statistics.median(walls[n])
        ms = np.array(lat[n]) * 1e3
        out[n] = {"qps": len(timed) / wall, "p50_ms": float(np.percentile(ms, 50)),
                  "p99_ms": float(np.percentile(ms, 99)), "cpu_per_wall": sum(cpus[n]) / sum(walls[n])}
    return out


def overlap_at_k(a: list, b: list) -> float:
    vals = []
    for x, y in zip(a, b):
        m = min(TOP_K, len(x), len(y))
        vals.append(len(set(x) & set(y)) / m if m else float(len(x) == len(y)))
    return float(np.mean(vals))


# ---------------------------------------------------------------- machine
def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_facts() -> dict:
    try:
        from hybridsearch._native import _kernels as K
        simd = K.simd_level()
    except (ImportError, AttributeError):
        simd = "unknown"
    return {
        "cpu": cpu_model(), "cores": os.cpu_count(),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "simd": simd, "python": platform.python_version(),
        **{dist: version(dist) for dist in ("hybridsearch", "numpy", "bm25s", "tantivy", "PyStemmer", "scipy")},
        "threadpools": [f"{p['internal_api']} ({p['num_threads']} threads)" for p in threadpool_info()],
    }


# ---------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK['n']:,} documents and {QUICK['queries']} queries (default {FULL['n']:,} / "
                        f"{FULL['queries']:,})")
    p.add_argument("--n", type=int, help="documents")
    p.add_argument("--queries", type=int, help="timed queries")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="tantivy indexing threads")
    p.add_argument("--repeats", type=int, default=REPEATS, help="timed passes (median)")
    p.add_argument("--no-hnsw", action="store_true", help="skip the storage='hnsw' rows")
    p.add_argument("--json", metavar="PATH", help="also write all figures to this JSON file")
    return p.parse_args(argv)


def fmt_ratio(a, b) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


def main(argv=None) -> int:
    args = parse_args(argv)
    base = QUICK if args.quick else FULL
    n, nq = args.n or base["n"], args.queries or base["queries"]
    started = time.perf_counter()
    facts = machine_facts()
    print("== machine ==")
    for key in ("cpu", "cores", "cores_available", "simd", "python", "hybridsearch", "numpy", "bm25s",
                "tantivy", "PyStemmer", "scipy"):
        print(f"  {key:16s} {facts[key]}")
    print(f"  {'threadpools':16s} {'; '.join(facts['threadpools']) or 'none'}")

    t0 = time.perf_counter()
    docs, queries, qvecs = make_corpus(n, nq)
    warmup, timed = list(range(N_WARMUP)), list(range(N_WARMUP, N_WARMUP + nq))
    print(f"== corpus == {n:,} products (title {TITLE_WORDS} words, description {DESC_WORDS}, Zipf {ZIPF} over "
          f"{VOCAB:,} pseudo-words, {N_CATEGORIES} categories, {DIM}-d clustered vectors), {nq:,} queries of 3-8 "
          f"title words + {N_WARMUP} warm-up queries ({time.perf_counter() - t0:.1f} s)")
    print(f"== settings == top-{TOP_K}; BM25 k1=1.2 b=0.75; search 1 thread, one query per call, median of "
          f"{args.repeats} round-robin passes after {N_WARMUP} warm-up queries")

    candidates = [Ours("memory")] + ([] if args.no_hnsw else [Ours("hnsw")]) + \
        [OursOneField(), Bm25s(), Tantivy(args.threads)]
    engines, status, build = [], {}, {}
    print("== index ==")
    for e in candidates:
        gc.collect()
        t = time.perf_counter()
        try:
            e.build(docs)
        except Unavailable as exc:
            status[e.name] = f"not available ({exc})"
        except Exception as exc:  # noqa: BLE001 -- one broken engine must not hide the others
            status[e.name] = f"error ({type(exc).__name__}: {exc})"
        else:
            build[e.name] = time.perf_counter() - t
            status[e.name] = "measured"
            engines.append(e)
        shown = f"{build[e.name]:7.2f} s  {e.note}" if e.name in build else status[e.name]
        print(f"  {e.name + ':':9s} {shown}", flush=True)

    # every variant answers one query before it is timed; a failure there takes only that variant out
    fns, owner = {}, {}
    for e in engines:
        for v, f in e.searchers(queries, qvecs).items():
            try:
                f(warmup[0])
            except hs.UnsupportedError as exc:
                status[v] = f"not available ({exc})"
                continue
            except Exception as exc:  # noqa: BLE001
                status[v] = f"error ({type(exc).__name__}: {exc})"
                continue
            fns[v], owner[v] = f, e.name
    for name in [e.name for e in candidates]:
        if name.startswith("ours") and name not in fns:
            print(f"  {name}: {status.get(name)}: no figures for it")

    with threadpool_limits(limits=1):
        speed = time_round_robin(fns, timed, warmup, args.repeats)
        tops = {v: [f(i) for i in timed] for v, f in fns.items()}
        batched = {}
        bm = next((e for e in engines if e.name == "bm25s"), None)
        if bm is not None:
            for threads, key in ((0, "bm25s batched, 1 thread"), (-1, f"bm25s batched, {os.cpu_count()} threads")):
                texts = [queries[i] for i in timed]
                with threadpool_limits(limits=os.cpu_count() if threads else 1):
                    bm.batched(texts[:N_WARMUP], threads)
                    walls = []
                    for _ in range(args.repeats):
                        t = time.perf_counter()
                        bm.batched(texts, threads)
                        walls.append(time.perf_counter() - t)
                batched[key] = {"qps": nq / statistics.median(walls)}
        hyb_fns = {}
        for e in engines:
            if isinstance(e, Ours) and e.name in fns:
                hyb_fns.update(e.hybrid(queries, qvecs))
        hybrid = time_round_robin(hyb_fns, timed, warmup, args.repeats) if hyb_fns else {}

    print(f"\n== single-thread search: {nq:,} queries, query string -> top-{TOP_K} ids ==")
    print(f"  {'engine':46s} {'index s':>8s} {'QPS':>9s} {'p50 ms':>8s} {'p99 ms':>8s} {'CPU/wall':>9s}")
    for v, s in speed.items():
        label = VARIANT_LABELS.get(v) or next(e.label for e in engines if e.name == v)
        idx = f"{build[owner[v]]:8.2f}" if v == owner[v] else f"{'':8s}"
        print(f"  {label:46s} {idx} {s['qps']:9,.0f} {s['p50_ms']:8.3f} {s['p99_ms']:8.3f} {s['cpu_per_wall']:9.2f}")
    for key, s in batched.items():
        print(f"  {key:46s} {'':8s} {s['qps']:9,.0f}   (one retrieve() of all queries, tokenising included)")

    names = [v for v in tops if v != "tantivy count=True"]
    overlap = {}
    print(f"\n== overlap@{TOP_K} (mean over queries) ==")
    print("  " + " " * 15 + "".join(f"{v[:14]:>15s}" for v in names))
    for a in names:
        cells = []
        for b in names:
            if a == b:
                cells.append(f"{'-':>15s}")
                continue
            o = overlap_at_k(tops[a], tops[b])
            if a < b:
                overlap[f"{a} / {b}"] = o
            cells.append(f"{o:15.3f}")
        print(f"  {a[:15]:15s}" + "".join(cells))
    print("  (ours and tantivy-dismax score the best field, tantivy sums the fields, bm25s and ours-1f see "
          "one concatenated field: low overlap across those groups is the semantics, not an error)")

    if hybrid:
        print("\n== ours, hybrid and filtered (single-thread QPS; filter = category c3, ~5% of the products) ==")
        for v, s in hybrid.items():
            print(f"  {v:46s} {s['qps']:9,.0f}  p50 {s['p50_ms']:7.3f} ms  p99 {s['p99_ms']:7.3f} ms")

    targets = []
    main_ours = next((v for v in ("ours", "ours-hnsw") if v in speed), None)
    print("\n== TARGETS (ours vs the others, measured in this run) ==")
    if main_ours is None:
        print("  ours: not available -- no targets evaluated")
    else:
        tq, bq = speed.get("tantivy", {}).get("qps"), speed.get("bm25s", {}).get("qps")
        oq, ob, tb = speed[main_ours]["qps"], build.get(main_ours), build.get("tantivy")
        for label, value, ok in (
            (f"QPS: ours >= {QPS_VS_TANTIVY:g}x tantivy", oq / tq if tq else None, lambda x: x >= QPS_VS_TANTIVY),
            (f"QPS: ours >= {QPS_VS_BM25S:g}x bm25s (single query)", oq / bq if bq else None,
             lambda x: x >= QPS_VS_BM25S),
            (f"index time: ours <= {INDEX_VS_TANTIVY:g}x tantivy ({args.threads} threads)",
             ob / tb if tb else None, lambda x: x <= INDEX_VS_TANTIVY),
        ):
            verdict = "n/a" if value is None else ("PASS" if ok(value) else "MISS")
            targets.append({"engine": main_ours, "target": label, "value": value, "pass": None if value is None
                            else verdict == "PASS"})
            print(f"  {label:52s} {'n/a' if value is None else f'{value:.2f}x':>7s}  {verdict}   ({main_ours})")
        print("  info: ours / tantivy-dismax QPS (same best-field semantics): "
              f"{fmt_ratio(oq, speed.get('tantivy-dismax', {}).get('qps'))}; ours-1f / bm25s QPS (same single "
              f"field): {fmt_ratio(speed.get('ours-1f', {}).get('qps'), bq)}")
        if "ours-hnsw" in speed and main_ours != "ours-hnsw":
            print(f"  info: ours-hnsw / tantivy QPS {fmt_ratio(speed['ours-hnsw']['qps'], tq)}, "
                  f"index time ours-hnsw / tantivy {fmt_ratio(build.get('ours-hnsw'), tb)}")

    wall = time.perf_counter() - started
    print(f"\ntotal wall time {wall:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": facts,
                       "config": {"n": n, "queries": nq, "warmup": N_WARMUP, "repeats": args.repeats, "top_k": TOP_K,
                                  "vocab": VOCAB, "zipf": ZIPF, "tantivy_threads": args.threads, "seed": SEED},
                       "status": status, "engines": {e.name: {"label": e.label, "note": e.note} for e in engines},
                       "index_s": build, "search": speed, "bm25s_batched": batched, "overlap": overlap,
                       "hybrid": hybrid, "targets": targets, "wall_s": wall}, f, indent=2, default=str)
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
