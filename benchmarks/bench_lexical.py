"""Lexical BM25 benchmark: ours (DocumentArray storage="memory") vs bm25s vs tantivy, side by side.

Corpus (fixed seed): N synthetic products, title ~12 words and description ~40 words
drawn from a Zipfian vocabulary of 50,000 pseudo-words (with English-like suffixes,
so stemming merges some), a keyword category (20 values) and a 64-d vector.
Queries: 3-8 consecutive words of a random title (so they hit).

Per engine: index time (from the Python strings; ours includes validating the
documents), single-thread QPS with one query per call (warm-up, median of 3 passes,
round-robin over engines), and overlap@10 between engines. Scoring differs by
design: ours takes the best field (multi_match best_fields), tantivy sums its
per-field scores over title and description, bm25s sees one concatenated field;
the overlap says how comparable the work is. "ours-1f" indexes the concatenation
as one field, the same work as bm25s, so their overlap checks our BM25 against
an independent implementation.

    python benchmarks/bench_lexical.py --quick     # 20k documents, 200 queries
    python benchmarks/bench_lexical.py             # 200k documents, 1,000 queries
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import hybridsearch as hs
from machine import cpu_model  # benchmarks/machine.py

try:
    import bm25s
    import Stemmer
except ImportError:  # optional: its rows are skipped
    bm25s = None
try:
    import tantivy
except ImportError:
    tantivy = None

SEED = 42
TOP_K = 10


class Product(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    category: hs.Keyword
    embedding: hs.Vector[64]


def make_corpus(n: int, nq: int):
    rng = np.random.default_rng(SEED)
    syllables = ["ka", "ri", "to", "mo", "ne", "sa", "lu", "pi", "de", "go", "ra", "ve", "no", "si", "ta", "mi"]
    suffixes = ["", "", "s", "ing", "ed", "er"]
    vocab = 50000
    words = np.array(["".join(rng.choice(syllables, rng.integers(2, 4))) + rng.choice(suffixes)
                      for _ in range(vocab)])
    p = 1.0 / np.arange(1, vocab + 1) ** 1.07
    p /= p.sum()
    title = rng.choice(vocab, (n, 12), p=p)
    desc = rng.choice(vocab, (n, 40), p=p)
    centres = rng.standard_normal((50, 64)).astype(np.float32)
    vecs = centres[rng.integers(0, 50, n)] + 0.5 * rng.standard_normal((n, 64)).astype(np.float32)
    docs = [{"id": str(i), "title": " ".join(words[title[i]]), "description": " ".join(words[desc[i]]),
             "category": f"c{i % 20}", "embedding": vecs[i]} for i in range(n)]
    queries = []
    for _ in range(nq):
        t = title[rng.integers(n)]
        a = int(rng.integers(0, 5))
        queries.append(" ".join(words[t[a: a + int(rng.integers(3, 9))]]))
    qvecs = centres[rng.integers(0, 50, nq)] + 0.5 * rng.standard_normal((nq, 64)).astype(np.float32)
    return docs, queries, qvecs


# ------------------------------------------------------------------ engines
class Ours:
    name = "ours"

    def build(self, docs):
        self.da = hs.DocumentArray(Product, storage="memory")
        self.da.extend(docs)

    def search(self, q):
        return self.da.find(text=q, limit=TOP_K)

    def ids(self, res):
        return [int(i) for i in res.ids]


class OneField(hs.Document):
    text: hs.Text


class OursOneField(Ours):
    """Title + description as one field: the same work bm25s does (for the overlap check)."""

    name = "ours-1f"

    def build(self, docs):
        self.da = hs.DocumentArray(OneField, storage="memory")
        self.da.extend([{"id": d["id"], "text": d["title"] + " " + d["description"]} for d in docs])


class Bm25s:
    name = "bm25s"

    def build(self, docs):
        self.stemmer = Stemmer.Stemmer("english")
        corpus = [d["title"] + " " + d["description"] for d in docs]
        tokens = bm25s.tokenize(corpus, stopwords=None, stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        self.retriever.index(tokens, show_progress=False)

    def search(self, q):
        tokens = bm25s.tokenize([q], stopwords=None, stemmer=self.stemmer, show_progress=False)
        return self.retriever.retrieve(tokens, k=TOP_K, show_progress=False, n_threads=1)

    def ids(self, res):
        return [int(i) for i in np.asarray(res[0])[0]]


class Tantivy:
    name = "tantivy"

    def build(self, docs):
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("title", stored=False, tokenizer_name="en_stem")
        sb.add_text_field("description", stored=False, tokenizer_name="en_stem")
        sb.add_integer_field("id", stored=True, indexed=True, fast=True)
        self.index = tantivy.Index(sb.build())
        writer = self.index.writer(heap_size=512 << 20, num_threads=os.cpu_count() or 1)
        for d in docs:
            writer.add_document(tantivy.Document(id=int(d["id"]), title=d["title"], description=d["description"]))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, q):
        # our queries are plain words; no query-syntax characters to escape
        return self.searcher.search(self.index.parse_query(q, ["title", "description"]), TOP_K)

    def ids(self, res):
        return [self.searcher.doc(addr)["id"][0] for _, addr in res.hits]


ENGINES = [Ours, OursOneField] + ([Bm25s] if bm25s else []) + ([Tantivy] if tantivy else [])


def timed_passes(fns: dict, queries: list, repeats: int = 3) -> dict:
    """Median seconds per pass for each engine, passes interleaved round-robin."""
    for f in fns.values():  # warm-up
        for q in queries[: min(100, len(queries))]:
            f(q)
    times = {n: [] for n in fns}
    for _ in range(repeats):
        for n, f in fns.items():
            t = time.perf_counter()
            for q in queries:
                f(q)
            times[n].append(time.perf_counter() - t)
    return {n: statistics.median(v) for n, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000 documents, 200 queries")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--queries", type=int, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n = args.n or (20000 if args.quick else 200000)
    nq = args.queries or (200 if args.quick else 1000)
    from hybridsearch._native import _kernels as K
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores, simd {K.simd_level()}, python {platform.python_version()}")
    print(f"versions: bm25s {getattr(bm25s, '__version__', 'not installed')}, "
          f"tantivy {getattr(tantivy, '__version__', 'installed' if tantivy else 'not installed')}")
    docs, queries, qvecs = make_corpus(n, nq)
    print(f"corpus: {n:,} documents (title 12 words, description 40), {nq:,} queries of 3-8 title words")
    engines, build = [], {}
    for cls in ENGINES:
        e = cls()
        t = time.perf_counter()
        e.build(docs)
        build[e.name] = time.perf_counter() - t
        engines.append(e)
        print(f"  indexed {e.name:8s} in {build[e.name]:6.2f} s")
    secs = timed_passes({e.name: e.search for e in engines}, queries)
    qps = {name: nq / s for name, s in secs.items()}
    top = {e.name: [e.ids(e.search(q)) for q in queries] for e in engines}
    print("\n  engine     index s   single-thread QPS")
    for e in engines:
        print(f"  {e.name:8s} {build[e.name]:9.2f} {qps[e.name]:12,.0f}")
    print("\n  overlap@10:")
    names = [e.name for e in engines]
    overlap = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            o = np.mean([len(set(x) & set(y)) / max(1, min(TOP_K, len(x), len(y)) if x and y else 1)
                         for x, y in zip(top[a], top[b])])
            overlap[f"{a}/{b}"] = float(o)
            print(f"    {a} vs {b}: {o:.3f}")
    ours = engines[0].da
    hybrid = {
        "text + vector (sum)": lambda i: ours.find(text=queries[i], vector=qvecs[i], limit=TOP_K),
        "text + vector (rrf)": lambda i: ours.find(text=queries[i], vector=qvecs[i], fusion="rrf", limit=TOP_K),
        "text + vector + category filter": lambda i: ours.find(text=queries[i], vector=qvecs[i], limit=TOP_K,
                                                               filter={"category": "c3"}),
        "text + category filter": lambda i: ours.find(text=queries[i], limit=TOP_K, filter={"category": "c3"}),
    }
    hsecs = timed_passes(hybrid, list(range(nq)))
    print("\n  ours, hybrid and filtered (single-thread QPS):")
    for name, s in hsecs.items():
        print(f"    {name:34s} {nq / s:9,.0f}")
    targets = []
    if "tantivy" in qps:
        targets.append(("QPS >= tantivy's", qps["ours"] / qps["tantivy"], 1.0))
        targets.append(("index time <= tantivy's", build["ours"] / build["tantivy"], None))
    if "bm25s" in qps:
        targets.append(("QPS >= 3x bm25s'", qps["ours"] / qps["bm25s"], 3.0))
    print("\n== TARGETS ==")
    for label, value, need in targets:
        ok = value >= need if need is not None else value <= 1.0
        print(f"  {label:28s} {value:6.2f}x  {'PASS' if ok else 'MISS'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": n, "queries": nq, "index_s": build, "qps": qps, "overlap": overlap,
                       "hybrid_qps": {k: nq / v for k, v in hsecs.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
