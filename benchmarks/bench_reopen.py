"""Reopening a saved hnsw collection: open time, resident memory after open and after queries,
and read-only processes sharing one path beside a writer.

A child process builds the collection once (128-d vectors, an 8-word hs.Text title, a keyword,
an int and a float per document, one extend_columns call, m 16 / ef_construct 64) under a
temporary path and closes it (the snapshot is written). Then, each in a fresh process: open the
path and time it (median of --repeats opens; the page cache is warm after the first, as for a
restarted web worker), RSS growth over the bare interpreter right after open, after 100 vector
queries and after 100 text queries. The snapshot's arrays are mapped, not parsed: the open
checksums every byte (streamed, not kept) and checks the graph's links, and RSS grows only with
what queries touch. Last, --readers read-only processes open the path while a writer holds it
open, each run the same queries, and report RSS and PSS (shared pages split between the
processes that map them).

    python benchmarks/bench_reopen.py                          # 200,000 documents
    python benchmarks/bench_reopen.py --n 1000000 --out DIR    # the size docs/benchmarks.md reports
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from hybridsearch.bench.corpora import SHOP_WORDS, shop_columns, shop_model
from hybridsearch.bench.script import parser, start


def _memory() -> dict:
    """RSS and PSS of this process in bytes (PSS splits shared pages between their mappers)."""
    out = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                out[key.lower()] = int(rest.split()[0]) * 1024
    return out


def build(path: str, n: int) -> dict:
    import hybridsearch as hs
    rng = np.random.default_rng(0)
    da = hs.DocumentArray(shop_model(), storage="hnsw", path=path, m=16, ef_construct=64)
    t = time.perf_counter()
    step = 250_000
    for lo in range(0, n, step):
        da.extend_columns(shop_columns(lo, min(n, lo + step), rng))
    built = time.perf_counter() - t
    t = time.perf_counter()
    da.close()
    return {"build_s": built, "close_s": time.perf_counter() - t,
            "file_bytes": sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))}


def _queries(da, n_queries: int) -> None:
    rng = np.random.default_rng(7)
    for q in rng.standard_normal((n_queries, 128)).astype(np.float32):
        da.find(vector=q, limit=10)


def _texts(da, n_queries: int) -> None:
    rng = np.random.default_rng(8)
    for _ in range(n_queries):
        da.find(text=" ".join(SHOP_WORDS[rng.integers(0, len(SHOP_WORDS), 3)]), limit=10)


def reopen(path: str, read_only: bool, queries: int) -> dict:
    import hybridsearch as hs
    import hybridsearch.storages.local.hnsw  # noqa: F401 -- imported before the clock and the baseline
    model = shop_model()
    base = _memory()["rss"]
    t = time.perf_counter()
    da = hs.DocumentArray(model, storage="hnsw", path=path, read_only=read_only)
    out = {"open_s": time.perf_counter() - t, "rss_open": _memory()["rss"] - base, "count": len(da)}
    _queries(da, queries)
    out["rss_vector"] = _memory()["rss"] - base
    _texts(da, queries)
    out.update({"rss_text": _memory()["rss"] - base, **_memory()})
    if read_only:
        time.sleep(2.0)  # the other readers measure while this one still maps the files
    da.close()
    return out


def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict:
    out, _ = p.communicate()
    if p.returncode:
        raise RuntimeError(f"child failed ({p.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=200_000, help="documents (default 200,000; docs/benchmarks.md reports 1,000,000)")
    ap.add_argument("--repeats", type=int, default=3, help="timed opens (median)")
    ap.add_argument("--queries", type=int, default=100, help="vector and text queries after the open")
    ap.add_argument("--readers", type=int, default=2, help="read-only processes opened beside a writer")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, path = args.child[0], args.child[1]
        res = build(path, args.n) if kind == "build" else reopen(path, kind == "ro", args.queries)
        res["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(res))
        return 0
    out, facts = start("reopen", args)
    mb = 1 << 20
    tmp = tempfile.mkdtemp(prefix="hs-reopen-")
    path = os.path.join(tmp, "idx")
    try:
        b = _result(_child("build", path, "--n", str(args.n)))
        out.say(f"n={args.n:,}: built in {b['build_s']:.1f} s, close (snapshot) {b['close_s']:.1f} s, "
                f"files {b['file_bytes'] / mb:,.0f} MB")
        opens = [_result(_child("rw", path, "--n", str(args.n), "--queries", str(args.queries)))
                 for _ in range(args.repeats)]
        med = sorted(opens, key=lambda r: r["open_s"])[len(opens) // 2]
        out.say(f"open: median {med['open_s']:.3f} s of {[round(r['open_s'], 3) for r in opens]} "
                f"(target <= 1 s at 1M: {med['open_s'] / 1.0:.2f}x)")
        out.say(f"RSS over the interpreter: after open {med['rss_open'] / mb:,.0f} MB "
                f"({med['rss_open'] / b['file_bytes']:.1%} of the files), after {args.queries} vector queries "
                f"{med['rss_vector'] / mb:,.0f} MB, after {args.queries} text queries {med['rss_text'] / mb:,.0f} MB")
        import hybridsearch as hs
        writer = hs.DocumentArray(shop_model(), storage="hnsw", path=path)  # holds the lock meanwhile
        readers = [_child("ro", path, "--n", str(args.n), "--queries", str(args.queries))
                   for _ in range(args.readers)]
        got = [_result(p) for p in readers]
        writer.close()
        for i, r in enumerate(got):
            out.say(f"read-only reader {i} (writer open): open {r['open_s']:.3f} s, after queries RSS "
                    f"{r['rss'] / mb:,.0f} MB (+{r['rss_text'] / mb:,.0f} MB over the interpreter), PSS "
                    f"{r['pss'] / mb:,.0f} MB, {r['count']:,} documents")
        out.save({"machine": facts, "config": vars(args), "build": b, "opens": opens, "readers": got})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
