"""Token positions in the inverted index: what they cost to index and hold, and phrase query speed.

--n documents of one 8-word hs.Text title (Zipf 1.07 over 20,000 pseudo-words), storage
"memory". Measured: the native index call alone on prepared term ids (InvertedIndex.add, median
of --repeats fresh indexes), extend_columns of the titles (analysis + index + columns, median of
--repeats fresh collections), the index's allocated bytes (`stats()["bytes"]["postings"]`) and
the resident memory one native index takes (RSS growth, malloc headers included), the bytes of
its snapshot arrays, then single-thread find(text=..., limit=10) latency of plain
two-word queries, quoted two- and three-word phrases cut from titles, and "+a +b". Run it on
two builds (before and after a change) to compare; a build without the query syntax reads the
quotes and signs as plain words.

    python benchmarks/bench_phrase.py                 # 100,000 documents, 1,000 queries
    python benchmarks/bench_phrase.py --n 1000000 --out DIR
"""
import sys
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.corpora import zipf_titles
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.timing import release_free_heap, rss_bytes
from hybridsearch.engine.lexical import TextField, analyzer_for  # the index call alone (no public API)


class Title(hs.Document):
    title: hs.Text


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def latency(da, texts: list) -> tuple:
    for t in texts[:50]:  # warm-up
        da.find(text=t, limit=10)
    ms = []
    for t in texts:
        s = time.perf_counter()
        da.find(text=t, limit=10)
        ms.append((time.perf_counter() - s) * 1e3)
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def main(argv=None) -> int:
    ap = parser(__doc__, full=(100_000, 1000), what="documents")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, _ = start("phrase", args)
    rng = np.random.default_rng(0)
    docs = zipf_titles(n, rng)
    slots = np.arange(n, dtype=np.int64)

    field = TextField("title", analyzer_for(None))
    field.add(slots, docs)  # the term ids, once, so the next timing is the native call alone
    exported = field.index.export()
    words = field.analyzer.words_batch(docs)
    flat = np.fromiter((field.tid_of[w] for ws in words for w in ws), dtype=np.int32)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(ws) for ws in words], out=offs[1:])
    t_kernel = median_time(lambda: type(field.index)().add(slots, flat, offs), args.repeats)
    release_free_heap()
    before = rss_bytes()
    kept = type(field.index)()
    kept.add(slots, flat, offs)
    release_free_heap()
    rss = rss_bytes() - before  # what malloc really holds for the index, headers included
    del kept
    cols = {"id": [f"d{i}" for i in range(n)], "title": docs}
    t_ingest = median_time(lambda: hs.DocumentArray(Title, storage="memory").extend_columns(cols), args.repeats)
    da = hs.DocumentArray(Title, storage="memory")
    da.extend_columns(cols)
    postings = da.stats()["bytes"]["postings"]
    snapshot = sum(a.nbytes for a in exported.values())

    picks = rng.integers(0, n, nq)
    starts = rng.integers(0, 6, nq)
    two = [docs[i].split()[s:s + 2] for i, s in zip(picks, starts)]
    three = [docs[i].split()[s:s + 3] for i, s in zip(picks, starts)]
    rows = [["plain: a b", *latency(da, [" ".join(w) for w in two])],
            ['phrase: "a b"', *latency(da, ['"%s"' % " ".join(w) for w in two])],
            ['phrase: "a b c"', *latency(da, ['"%s"' % " ".join(w) for w in three])],
            ["required: +a +b", *latency(da, [" ".join("+" + x for x in w) for w in two])]]
    out.say(f"{n:,} titles of 8 words; {flat.size:,} tokens, {len(exported['post_doc']):,} postings")
    out.table(["measure", "value"],
              [["InvertedIndex.add (native call), s", f"{t_kernel:.3f}"],
               ["extend_columns (analysis + index + columns), s", f"{t_ingest:.3f}"],
               ["index bytes allocated (stats postings)", f"{postings:,}"],
               ["RSS growth of one InvertedIndex.add, bytes", f"{rss:,}"],
               ["snapshot arrays of the index, bytes", f"{snapshot:,}"]])
    out.table(["query (limit=10)", "p50 ms", "p99 ms"], [[r[0], f"{r[1]:.3f}", f"{r[2]:.3f}"] for r in rows])
    out.save({"n": n, "tokens": int(flat.size), "kernel_add_s": t_kernel, "ingest_s": t_ingest,
                "postings_bytes": int(postings), "rss_bytes": int(rss), "snapshot_bytes": int(snapshot),
                "latency_ms": {r[0]: {"p50": r[1], "p99": r[2]} for r in rows}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
