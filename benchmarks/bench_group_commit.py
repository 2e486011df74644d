"""Durable writes under load on hnsw with path=: single-document writes per second and fsyncs per write
for 1, 2, 4, 8 and 16 writer threads (group commit: concurrent writes share one fsync), on a collection
of --n documents; the one-thread rate is the anchor. Each thread alternates update(id, price=...),
extend([doc]) of a new document and a delete of it.

    python benchmarks/bench_group_commit.py
    python benchmarks/bench_group_commit.py --n 100000 --writes 400 --out DIR
    python benchmarks/bench_group_commit.py --fsync-ms 5     # as on a disk whose fsync takes 5 ms more

--fsync-ms adds a sleep to every fsync (a network or consumer disk; a local NVMe fsync is well
under a millisecond), which is where sharing fsyncs pays.
"""
import os
import sys
import tempfile
import threading
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.script import parser, start


class Product(hs.Document):
    title: hs.Text
    price: int = 0
    v: hs.Vector[64]


def run(da, threads: int, writes: int, rng) -> tuple:
    vecs = rng.standard_normal((threads * writes, 64)).astype(np.float32)

    def work(t):
        for k in range(writes):
            i = t * writes + k
            if k % 3 == 0:
                da.update(f"p{i % 1000}", price=i)
            elif k % 3 == 1:
                da.extend([Product(id=f"new{threads}_{i}", title="new item", v=vecs[i])])
            else:
                da.delete([f"new{threads}_{i - 1}"])

    before = da.stats()["fsyncs"]
    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    t0 = time.perf_counter()
    for p in pool:
        p.start()
    for p in pool:
        p.join()
    secs = time.perf_counter() - t0
    return threads * writes / secs, (da.stats()["fsyncs"] - before) / (threads * writes)


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=20_000, help="documents in the collection")
    ap.add_argument("--writes", type=int, default=150, help="writes per thread")
    ap.add_argument("--fsync-ms", type=float, default=0.0, help="extra latency added to every fsync")
    args = ap.parse_args(argv)
    if args.fsync_ms:
        real_fsync = os.fsync

        def slow_fsync(fd):
            time.sleep(args.fsync_ms / 1000)
            real_fsync(fd)

        os.fsync = slow_fsync
    out, _ = start("group_commit", args)
    out.say(f"fsync: as the disk does it{f', plus {args.fsync_ms:g} ms each' if args.fsync_ms else ''}")
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        da = hs.DocumentArray(Product, storage="hnsw", path=d + "/col", ef_construct=64)
        da.extend_columns({"id": [f"p{i}" for i in range(args.n)], "title": ["an item"] * args.n,
                           "v": rng.standard_normal((args.n, 64)).astype(np.float32)})
        run(da, 2, 10, rng)  # warm-up
        base = None
        for threads in (1, 2, 4, 8, 16):
            rate, per = run(da, threads, args.writes, rng)
            base = base or rate
            rows.append({"threads": threads, "writes_per_s": rate, "fsyncs_per_write": per})
            out.say(f"{threads:2d} writer threads: {rate:8.0f} durable writes/s ({rate / base:.2f}x one thread), "
                    f"{per:.2f} fsyncs per write")
        da.close()
    out.save({"n": args.n, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
