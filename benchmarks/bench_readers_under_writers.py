"""Reads per second under concurrent writers, per storage, against the same readers alone.

    python benchmarks/bench_readers_under_writers.py                 # 20,000 x 64, 10 s per phase
    python benchmarks/bench_readers_under_writers.py --seconds 5 --storages hnsw,hnsw+path

Why: a durable write (journal append + fsync on `path=` storages) held under the lock that
readers share starves them (an issue measured 610 reads vs 3,642 writes in 25 s on hnsw with
path=, against 23,450 reads on memory). This script measures whether readers keep going while
writers write.

What: per storage (memory, hnsw, hnsw with path= in a temp dir, sqlite on a temp file), a
collection of --n documents (a 64-d float32 vector, a Keyword, an int, a short Text title) is
built through `extend`; after a warm-up with readers and writers, R reader threads run
`find(vector=q, limit=10)` in a loop for --seconds alone (the anchor) and again for
--seconds while W writer threads loop on small writes, alternating `update(id, price=...)`
and `extend([one new doc])`; the two phases alternate in --rounds parts so that drift on a
shared machine falls on both. Writers are unthrottled (closed loop). Only operations completed
inside the window are counted.
Printed per storage: reads/s alone, reads/s under writers, their ratio, writes/s, and the
p50/p99 read latency alone and under writers. Public API only (`import hybridsearch as hs`).
"""
import argparse
import datetime
import os
import platform
import shlex
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model  # noqa: E402  (benchmarks/machine.py)

import hybridsearch as hs  # noqa: E402

STORAGES = ["memory", "hnsw", "hnsw+path", "sqlite"]
WORDS = ("red blue green nokia phone case cable charger lamp desk chair book novel guide "
         "river stone paper glass metal wooden small large classic modern").split()


def schema(dim: int):
    class Item(hs.Document):
        title: hs.Text
        category: hs.Keyword
        price: int = 0
        v: hs.Vector[dim]
    return Item


def make_doc(rng, id_: str, dim: int) -> dict:
    return {"id": id_, "title": " ".join(rng.choice(WORDS, 3)), "category": f"c{rng.integers(20)}",
            "price": int(rng.integers(1000)), "v": rng.standard_normal(dim).astype(np.float32)}


def open_storage(name: str, Item, tmp: str):
    if name == "hnsw+path":
        return hs.DocumentArray(Item, storage="hnsw", path=os.path.join(tmp, "hnsw"))
    if name == "sqlite":
        return hs.DocumentArray(Item, storage="sqlite", path=os.path.join(tmp, "items.db"))
    return hs.DocumentArray(Item, storage=name)


def run_phase(da, Q, n_base: int, dim: int, readers: int, writers: int, seconds: float, tag: str):
    """R readers (and W writers) for `seconds` of wall time; (read latencies, number of writes)."""
    lat = [[] for _ in range(readers)]
    writes = [0] * writers
    errors = []
    start = threading.Barrier(readers + writers + 1)
    t = {}

    def reader(i: int) -> None:
        out, k, nq = lat[i], i * 97, len(Q)
        start.wait()
        end = t["end"]
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                return
            da.find(vector=Q[k % nq], limit=10)
            t1 = time.perf_counter()
            if t1 <= end:
                out.append(t1 - t0)
            k += 1

    def writer(i: int) -> None:
        rng = np.random.default_rng(1000 + i)
        k = 0
        start.wait()
        end = t["end"]
        while time.perf_counter() < end:
            if k % 2 == 0:
                da.update(str(int(rng.integers(n_base))), price=int(rng.integers(1000)))
            else:
                da.extend([make_doc(rng, f"{tag}-w{i}-{k}", dim)])
            if time.perf_counter() <= end:
                writes[i] += 1
            k += 1

    def guarded(fn, i):
        try:
            fn(i)
        except BaseException as e:  # noqa: BLE001 - reported after the phase
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(reader, i)) for i in range(readers)]
    threads += [threading.Thread(target=guarded, args=(writer, i)) for i in range(writers)]
    for th in threads:
        th.start()
    t["end"] = time.perf_counter() + seconds
    start.wait()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return np.concatenate([np.asarray(x) for x in lat]) if readers else np.empty(0), sum(writes)


def pct(lat: np.ndarray, q: float) -> str:
    return f"{np.percentile(lat, q) * 1e3:.2f}" if len(lat) else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="documents in the collection")
    ap.add_argument("--dim", type=int, default=64, help="vector dimension")
    ap.add_argument("--seconds", type=float, default=10.0, help="wall time of each phase, per storage")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of readers+writers before timing")
    ap.add_argument("--rounds", type=int, default=2,
                    help="each phase is split into this many alternating parts (alone, under, ...)")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--storages", default=",".join(STORAGES), help=f"comma list of {STORAGES}")
    ap.add_argument("--out", help="also write the text to DIR/readers_under_writers.txt")
    args = ap.parse_args()
    storages = [s.strip() for s in args.storages.split(",") if s.strip()]
    bad = [s for s in storages if s not in STORAGES]
    if bad:
        ap.error(f"unknown storage(s) {bad}; choose from {STORAGES}")

    lines = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"# readers under writers  {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}")
    say(f"machine: {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}")
    say(f"command: {shlex.join([sys.executable] + sys.argv)}")
    say(f"{args.n:,} docs x {args.dim}-d float32 + Keyword + int + Text title; {args.readers} readers "
        f"find(vector=q, limit=10); {args.writers} writers alternating update(id, price=) / "
        f"extend([1 doc]); {args.seconds:g} s per phase in {args.rounds} alternating parts, "
        f"after {args.warmup:g} s warm-up")
    say()

    rng = np.random.default_rng(7)
    Item = schema(args.dim)
    docs = [make_doc(rng, str(i), args.dim) for i in range(args.n)]
    Q = rng.standard_normal((1000, args.dim)).astype(np.float32)
    head = (f"{'storage':<10} {'build s':>8} {'reads/s alone':>14} {'reads/s w/ W':>13} {'ratio':>6} "
            f"{'writes/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99 alone':>10}")
    rows = []
    for name in storages:
        with tempfile.TemporaryDirectory(prefix="hs_rw_") as tmp:
            da = open_storage(name, Item, tmp)
            t0 = time.perf_counter()
            for s in range(0, args.n, 5000):
                da.extend(docs[s:s + 5000])
            build = time.perf_counter() - t0
            run_phase(da, Q, args.n, args.dim, args.readers, args.writers, args.warmup, "warm")
            alone, under, w, part = [], [], 0, args.seconds / args.rounds
            for r in range(args.rounds):  # alternate, so drift on a shared machine hits both
                alone.append(run_phase(da, Q, args.n, args.dim, args.readers, 0, part, "a")[0])
                lat, nw = run_phase(da, Q, args.n, args.dim, args.readers, args.writers, part, f"r{r}")
                under.append(lat)
                w += nw
            da.close()
            alone, under = np.concatenate(alone), np.concatenate(under)
        ra, ru = len(alone) / args.seconds, len(under) / args.seconds
        rows.append(f"{name:<10} {build:>8.1f} {ra:>14,.0f} {ru:>13,.0f} "
                    f"{(ru / ra if ra else float('nan')):>6.2f} {w / args.seconds:>9,.0f} "
                    f"{pct(under, 50):>8} {pct(under, 99):>8} {pct(alone, 99):>10}")
        print(f"  done: {rows[-1]}", file=sys.stderr, flush=True)
    say(head)
    for r in rows:
        say(r)
    say()
    say("reads/s: completed find() calls per second over all readers; ratio = under writers / alone; "
        "p50/p99: read latency under writers; p99 alone: the same readers with no writers.")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "readers_under_writers.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
