"""Lexical BM25: ours (DocumentArray) vs bm25s vs tantivy, side by side in one run.

Products from hybridsearch.bench.corpora (title 12 words, description 40, Zipf 1.07 over 50,000
pseudo-words of which 15% are inflections that stemming folds, 20 categories, 64-d vectors);
queries are 3-8 consecutive words of a title. Analysis is the same everywhere (words, lower
case, English Snowball, no stop words; BM25 k1=1.2, b=0.75) but the fields differ: ours scores
a document by its best field (title or description; also on storage="hnsw", whose index time
includes the graph) and, as "ours-1f", one joined field as bm25s does; tantivy sums the fields
("tantivy-dismax" takes the best one, as ours). Every timed call goes from the query string to
the top-10 ids, one per call on one thread, round-robin after a warm-up; medians of --repeats.

    python benchmarks/bench_lexical.py --quick     # 20,000 documents, 200 queries
    python benchmarks/bench_lexical.py             # 200,000 documents, 1,000 queries
    python benchmarks/bench_lexical.py --n 50000 --queries 500 --out DIR
"""
import sys

from threadpoolctl import threadpool_limits

from hybridsearch.bench import corpora as C
from hybridsearch.bench.adapters.anchors import cpu_count
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, quotient, ratio, verdict
from hybridsearch.bench.workloads import lexical

WARMUP = 100
TARGETS = (("QPS: ours >= 1x tantivy", "tantivy", "qps", lambda v: v >= 1.0),
           ("QPS: ours >= 3x bm25s (single query)", "bm25s", "qps", lambda v: v >= 3.0),
           ("index time: ours <= 1x tantivy", "tantivy", "index", lambda v: v <= 1.0))


def main(argv=None) -> int:
    ap = parser(__doc__, full=(200_000, 1000), quick=(20_000, 200), what="documents")
    ap.add_argument("--threads", type=int, default=cpu_count(), help="indexing threads of tantivy and of ours (the ours-1thread row uses one)")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes (median)")
    ap.add_argument("--no-hnsw", action="store_true", help="skip the storage='hnsw' rows")
    args = ap.parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("lexical", args)
    prod = C.products(n, nq + WARMUP, dim=64, vocab=50_000, title_words=12, query_words=(3, 8),
                      embedder="projection")
    out.say(f"{n:,} products, {nq:,} queries of 3-8 title words + {WARMUP} warm-up queries; index:")
    built, seconds, status = lexical.build(lexical.candidates(64, args.threads, not args.no_hnsw), prod, out.say)
    with threadpool_limits(limits=1):
        res = lexical.compare(built, prod, nq, WARMUP, args.repeats, status)
    speed, owner = res["search"], res["owner"]
    out.say("\n== single-thread search: query string -> top-10 ids ==")
    out.table(["variant", "index s", "QPS", "p50 ms", "p99 ms", "CPU/wall"],
              [[v, fmt(seconds.get(v), 2) if v == owner.get(v) else "", fmt(s.get("qps")), fmt(s.get("p50_ms"), 3),
                fmt(s.get("p99_ms"), 3), fmt(s.get("cpu_per_wall"), 2)] for v, s in speed.items()]
              + [[k, "", fmt(s["qps"]), "", "", ""] for k, s in res["bm25s_batched"].items()])
    out.say("\n== overlap@10 (mean over queries; best field, summed fields and one joined field differ by design) ==")
    out.table(["pair", "overlap@10"], [[k, fmt(v, 3)] for k, v in res["overlap"].items()])
    out.say("\n== ours, hybrid and filtered (single thread) ==")
    out.table(["variant", "QPS", "p50 ms", "p99 ms"],
              [[v, fmt(s.get("qps")), fmt(s.get("p50_ms"), 3), fmt(s.get("p99_ms"), 3)] for v, s in res["hybrid"].items()])
    values = {"qps": {k: s.get("qps") for k, s in speed.items()}, "index": seconds}
    rows = [[t, ratio(values[kind].get("ours"), values[kind].get(other)),
             verdict(quotient(values[kind].get("ours"), values[kind].get(other)), ok)] for t, other, kind, ok in TARGETS]
    out.say("\n== TARGETS (ours on memory vs the others, measured in this run) ==")
    out.table(["target", "value", "verdict"], rows)
    out.say(f"  info: ours / tantivy-dismax QPS {ratio(values['qps'].get('ours'), values['qps'].get('tantivy-dismax'))}"
            f"; ours-1f / bm25s QPS {ratio(values['qps'].get('ours-1f'), values['qps'].get('bm25s'))}")
    out.say(f"  info: ours' index time with its text fields on {args.threads} thread(s) "
            f"{fmt(seconds.get('ours'), 2)} s, on one {fmt(seconds.get('ours-1thread'), 2)} s "
            f"(speed-up {ratio(seconds.get('ours-1thread'), seconds.get('ours'))})")
    out.save({"machine": facts, "config": vars(args), "status": status, "index_s": seconds, **res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
