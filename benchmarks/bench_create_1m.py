"""Ingest cost: memory create of 1M documents via extend_columns, and RSS / raw after extend()
and extend_columns on memory and hnsw, each measured in a fresh child process.

create: ids "d{i}", a Vector[128] float32 block, a Keyword title of 1000 distinct values (the
issue's shape); median of --repeats fresh collections after one warm-up. RSS: the shop documents
of bench_memory.py at --rss-n rows, the input kept alive (an application holds it) and the growth
of RSS over extend()/extend_columns measured twice: as the process holds it (no trim) and after
malloc_trim(0). --baseline DIR runs the same children against another checkout (e.g. main) and
prints both side by side.

    python benchmarks/bench_create_1m.py
    python benchmarks/bench_create_1m.py --baseline /work/main --out DIR
"""
import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time

import numpy as np

from hybridsearch.bench.script import parser, start


def _rss() -> int:
    import resource
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def child_create(n: int, repeats: int) -> dict:
    import hybridsearch as hs

    class D(hs.Document):
        v: hs.Vector[128]
        title: hs.Keyword = ""

    X = np.random.default_rng(0).standard_normal((n, 128), dtype=np.float32)
    cols = {"id": [f"d{i}" for i in range(n)], "v": X, "title": [f"t{i % 1000}" for i in range(n)]}
    times = []
    for rep in range(repeats + 1):
        da = hs.DocumentArray(D)
        t = time.perf_counter()
        da.extend_columns(cols)
        if rep:  # the first is the warm-up
            times.append(time.perf_counter() - t)
        da.close()
        del da
        gc.collect()
    return {"create_s": float(np.median(times)), "times": times}


def child_rss(storage: str, n: int, via: str) -> dict:
    import hybridsearch as hs
    from hybridsearch.bench.corpora import shop_columns, shop_model

    model = shop_model()
    cols = shop_columns(0, n, np.random.default_rng(0))
    raw = cols["v"].nbytes + sum(len(s.encode()) for k in ("id", "title", "brand") for s in cols[k]) + 16 * n
    docs = None
    if via == "extend":
        names = list(cols)
        docs = [model(**{k: (cols[k][i].item() if k in ("stock", "price") else cols[k][i]) for k in names})
                for i in range(n)]
    da = hs.DocumentArray(model, storage=storage, **({"ef_construct": 64} if storage == "hnsw" else {}))
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    base = _rss()
    t = time.perf_counter()
    da.extend(docs) if docs is not None else da.extend_columns(cols)
    took = time.perf_counter() - t
    gc.collect()
    untrimmed = _rss() - base
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    trimmed = _rss() - base
    if storage == "hnsw":
        raw += da.stats()["bytes"]["graph"]  # as bench_memory.py: the index's links and codes are data
    return {"storage": storage, "via": via, "n": n, "raw": raw, "rss": untrimmed, "rss_trimmed": trimmed,
            "seconds": took}


def _run(code: str, args: list) -> dict:
    env = dict(os.environ, PYTHONPATH=code)
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args], env=env,
                         capture_output=True, text=True, check=True, cwd=code)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=1_000_000, help="documents created (default 1,000,000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rss-n", type=int, default=200_000, help="documents of the RSS runs (default 200,000)")
    ap.add_argument("--storages", default="memory,hnsw")
    ap.add_argument("--baseline", help="another checkout to measure beside this one (e.g. /work/main)")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        r = child_create(int(rest[0]), int(rest[1])) if kind == "create" else child_rss(rest[0], int(rest[1]), rest[2])
        print(json.dumps(r))
        return 0
    out, _ = start("create_1m", args)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    codes = [("this", here)] + ([("baseline", os.path.abspath(args.baseline))] if args.baseline else [])
    rows = []
    mb = 1 / 2 ** 20
    for label, code in codes:
        r = _run(code, ["create", str(args.n), str(args.repeats)])
        rows.append({"code": label, "path": code, **r})
        out.say(f"[{label}] memory create {args.n:,} via extend_columns: median {r['create_s']:.2f} s "
                f"(runs {', '.join(f'{t:.2f}' for t in r['times'])})")
    for storage in args.storages.split(","):
        for via in ("extend_columns", "extend"):
            for label, code in codes:
                r = _run(code, ["rss", storage, str(args.rss_n), via])
                rows.append({"code": label, "path": code, **r})
                out.say(f"[{label}] {storage} {via} n={args.rss_n:,}: RSS {r['rss'] * mb:.0f} MB = "
                        f"{r['rss'] / r['raw']:.2f}x raw, after malloc_trim {r['rss_trimmed'] / r['raw']:.2f}x "
                        f"(raw {r['raw'] * mb:.0f} MB; {r['seconds']:.1f} s)")
    out.save({"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
