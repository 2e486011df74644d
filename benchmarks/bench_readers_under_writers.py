"""Reads per second under concurrent writers, per storage, against the same readers alone.

    python benchmarks/bench_readers_under_writers.py                 # 20,000 x 64, 10 s per phase
    python benchmarks/bench_readers_under_writers.py --seconds 5 --storages hnsw,hnsw+path

Why: a durable write (journal append + fsync on `path=` storages) held under the lock that
readers share starves them. What: per storage (memory, hnsw, hnsw with path= in a temporary
folder, sqlite on a temporary file) a collection of --n products (a --dim vector, a keyword, an
int, text) built by extend; after a warm-up, R reader threads loop on find(vector=q, limit=10)
for --seconds alone (the anchor) and again while W writer threads loop on small writes,
alternating update(id, price=...) and extend([one new document]); the phases alternate in
--rounds parts. Only operations completed inside the window count. Public API only.
"""
import sys
import tempfile

from hybridsearch.bench import corpora as C
from hybridsearch.bench.script import parser, start
from hybridsearch.bench.tables import fmt
from hybridsearch.bench.workloads.contention import contention

STORAGES = ["memory", "hnsw", "hnsw+path", "sqlite"]


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=20_000, help="documents in the collection")
    ap.add_argument("--dim", type=int, default=64, help="vector dimension")
    ap.add_argument("--seconds", type=float, default=10.0, help="wall time of each phase, per storage")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of readers + writers before timing")
    ap.add_argument("--rounds", type=int, default=2, help="parts each phase is split into (alone, under, ...)")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--storages", default=",".join(STORAGES), help=f"comma list of {STORAGES}")
    args = ap.parse_args(argv)
    storages = [s.strip() for s in args.storages.split(",") if s.strip()]
    if set(storages) - set(STORAGES):
        ap.error(f"unknown storage(s) {sorted(set(storages) - set(STORAGES))}; choose from {STORAGES}")
    out, facts = start("readers_under_writers", args)
    out.say(f"{args.n:,} products x {args.dim}-d; {args.readers} readers find(vector=q, limit=10); {args.writers} "
            f"writers alternating update(id, price=) / extend([1 doc]); {args.seconds:g} s per phase in "
            f"{args.rounds} alternating parts, after {args.warmup:g} s warm-up")
    prod = C.products(args.n, 1000, dim=args.dim, embedder="projection")
    rows = []
    for s in storages:
        with tempfile.TemporaryDirectory(prefix="hs_rw_") as tmp:
            rows.append(contention(s, prod, tmp, args.readers, args.writers, args.seconds, args.warmup, args.rounds))
    out.table(["storage", "build s", "reads/s alone", "reads/s w/ W", "ratio", "writes/s", "p50 ms", "p99 ms",
               "p99 alone"],
              [[r["storage"], fmt(r["build_s"], 1), fmt(r["reads_alone"]), fmt(r["reads_with_writers"]),
                fmt(r["ratio"], 2), fmt(r["writes"]), fmt(r["p50_ms"], 2), fmt(r["p99_ms"], 2), fmt(r["p99_alone_ms"], 2)]
               for r in rows])
    out.say("reads/s: completed find() calls per second over all readers; ratio = under writers / alone; "
            "p50/p99: read latency under writers; p99 alone: the same readers with no writers.")
    out.save({"machine": facts, "config": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
