"""sqlite storage: extend against memory, exact vector search against sqlite-vec's brute force,
and reopening a file.

Products from hybridsearch.bench.corpora with 128-d embeddings (cosine); both sides in this one
process on the same data, one query per call on one thread, median of 3 round-robin passes after
a warm-up; overlap@10 with ours next to every figure. The file then gets as many documents again
and is reopened (rows -> columns, vectors, inverted index).

    python benchmarks/bench_sqlite.py                 # 100,000 documents (200,000 for the reopen)
    python benchmarks/bench_sqlite.py --n 20000       # quicker
    pip install "sqlite-vec>=0.1.6" pysqlite3-binary  # for the sqlite-vec rows (this Python's sqlite3
                                                      # cannot load extensions; pysqlite3-binary can)
"""
import sys
import tempfile

from hybridsearch.bench import corpora as C
from hybridsearch.bench.script import parser, sizes, start
from hybridsearch.bench.tables import fmt, ratio
from hybridsearch.bench.workloads.sqlite import sqlite_run


def main(argv=None) -> int:
    args = parser(__doc__, full=(100_000, 200), what="documents").parse_args(argv)
    n, nq = sizes(args)
    out, facts = start("sqlite", args)
    prod = C.products(2 * n, nq, dim=128, embedder="projection")
    with tempfile.TemporaryDirectory() as tmp:
        r = sqlite_run(prod, tmp, out.say)
    out.say(f"extend {n:,} documents in one call: sqlite {r['extend_sqlite_s']:.1f} s, memory "
            f"{r['extend_memory_s']:.1f} s (sqlite / memory {ratio(r['extend_sqlite_s'], r['extend_memory_s'])})")
    out.say(f"\nvector search, {n:,} x 128 cosine, top-10, exact on both sides, {nq} queries, 1 thread:")
    v = r["vector"]
    out.table(["", "QPS", "overlap@10 with ours"], [[k, fmt(x["qps"], 1), fmt(x["overlap"], 2)] for k, x in v.items()])
    vec = {k.split(", ")[1]: x["qps"] for k, x in v.items() if k.startswith("sqlite-vec")}
    for kind, ours in (("unfiltered", "ours, unfiltered"), ("filter", "ours, filter (columns bitset)")):
        if kind in vec:
            out.say(f"  ours / sqlite-vec, {kind}: {ratio(v[ours]['qps'], vec[kind], 1)}")
    out.say(f"\nreopen {r['documents']:,} documents: {r['reopen_s']:.1f} s; file {r['file_mib']:.0f} MiB")
    out.save({"machine": facts, "config": vars(args), **r})
    return 0


if __name__ == "__main__":
    sys.exit(main())
