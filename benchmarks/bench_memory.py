"""Memory budget: resident bytes of a collection against the raw bytes of its data, per component.

Each (storage, n) runs in a fresh child process: documents with a 128-d vector, an 8-word title,
a keyword, an int and a float are created with one extend_columns call, the input columns are
dropped and the allocator trimmed, and the growth of RSS over the process before the data existed
is the collection's cost. raw = vectors + UTF-8 bytes of ids, titles and keywords + 8 bytes per
number (+ graph and int8 codes for hnsw, which the budget counts as data). The breakdown comes from
stats()["bytes"] (allocated capacity per component); "python" is what RSS holds beyond them
(interpreter objects, allocator slack). Also prints create time and peak RSS.

    python benchmarks/bench_memory.py                          # memory and hnsw at 200,000
    python benchmarks/bench_memory.py --n 1000000 --storages memory,hnsw --out DIR
    python benchmarks/bench_memory.py --via both     # also through extend() of validated documents
"""
import argparse
import ctypes
import gc
import json
import resource
import subprocess
import sys
import time

import numpy as np

from hybridsearch.bench.corpora import shop_columns, shop_model
from hybridsearch.bench.script import parser, start


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def child(storage: str, n: int, ef_construct: int, via: str = "extend_columns") -> dict:
    import hybridsearch as hs

    opts = {"ef_construct": ef_construct} if storage == "hnsw" else {}
    model = shop_model()
    da = hs.DocumentArray(model, storage=storage, **opts)
    gc.collect()
    base = rss_bytes()
    cols = shop_columns(0, n, np.random.default_rng(0))
    raw = (cols["v"].nbytes + sum(len(s.encode()) for k in ("id", "title", "brand") for s in cols[k]) + 16 * n)
    docs = None
    if via == "extend":  # validated documents, as an application holds them, then dropped
        names = list(cols)
        docs = [model(**{k: (cols[k][i].item() if k in ("stock", "price") else cols[k][i]) for k in names})
                for i in range(n)]
    t = time.perf_counter()
    if docs is not None:
        da.extend(docs)
    else:
        da.extend_columns(cols)
    create_s = time.perf_counter() - t
    del cols, docs
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    held = rss_bytes() - base
    sizes = da.stats()["bytes"]
    if storage == "hnsw":
        raw += sizes["graph"]  # links and int8 codes are the index's data, counted in raw
    return {"storage": storage, "via": via, "n": n, "raw": raw, "rss": held, "create_s": create_s,
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "bytes": sizes, "python": held - sum(sizes.values())}


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=200_000, help="documents (default 200,000)")
    ap.add_argument("--storages", default="memory,hnsw")
    ap.add_argument("--ef-construct", type=int, default=64, help="hnsw ef_construct (default 64)")
    ap.add_argument("--via", default="extend_columns",
                    help="extend_columns, extend (validated documents) or both (default extend_columns)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # storage n via: measure in this process
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.ef_construct, args.child[2])))
        return 0
    out, _ = start("memory", args)
    rows = []
    mb = 1 / 2 ** 20
    vias = ["extend_columns", "extend"] if args.via == "both" else [args.via]
    for storage, via in [(s, v) for s in args.storages.split(",") for v in vias]:
        res = subprocess.run([sys.executable, __file__, "--child", storage, str(args.n), via,
                              "--ef-construct", str(args.ef_construct)],
                             capture_output=True, text=True, check=True)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        rows.append(r)
        parts = ", ".join(f"{k} {v * mb:.1f}" for k, v in {**r["bytes"], "python": r["python"]}.items())
        out.say(f"{storage} {via} n={r['n']:,}: RSS {r['rss'] * mb:.1f} MB = {r['rss'] / r['raw']:.2f}x raw "
                f"({r['raw'] * mb:.1f} MB); create {r['create_s']:.2f} s; peak RSS {r['peak_rss'] * mb:.0f} MB")
        out.say(f"    MB by component: {parts}")
    out.save({"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
