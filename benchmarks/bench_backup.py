"""Online backup (DocumentArray.backup) of --n documents while a writer goes on: the backup's time,
the writers' stall it reports, and the writer's own latency during the backup against its normal
append latency, on memory and hnsw with path= and on sqlite.

One writer thread makes single-document durable writes (extend([doc]) of a new document) in a
loop and times each call. First --normal seconds without a backup (the anchor: median and max
latency), then --backups backups one after another while it keeps writing; the latencies of the
writes that overlapped a backup give its max stall as the writer saw it. Each collection holds
--n documents in a snapshot plus --tail logged writes (the journal tail a backup copies as well).

    python benchmarks/bench_backup.py                         # 100,000 documents, 64-d
    python benchmarks/bench_backup.py --n 20000 --storages memory,sqlite --out DIR
"""
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

import hybridsearch as hs
from hybridsearch.bench.script import parser, start

DIM = 64


class Product(hs.Document):
    title: hs.Text
    category: hs.Keyword
    price: int = 0
    v: hs.Vector[DIM]


def fill(da, n: int, rng) -> None:
    for lo in range(0, n, 20_000):
        hi = min(n, lo + 20_000)
        da.extend_columns({"id": [f"p{i}" for i in range(lo, hi)],
                           "title": [f"item number {i} in a shop" for i in range(lo, hi)],
                           "category": [f"c{i % 20}" for i in range(lo, hi)], "price": list(range(lo, hi)),
                           "v": rng.standard_normal((hi - lo, DIM)).astype(np.float32)})


class Writer(threading.Thread):
    """Single-document writes in a loop: (start, seconds) of each call."""

    def __init__(self, da, rng) -> None:
        super().__init__(daemon=True)
        self.da, self.calls, self.stop = da, [], threading.Event()
        self.vecs = rng.standard_normal((4096, DIM)).astype(np.float32)

    def run(self) -> None:
        k = 0
        while not self.stop.is_set():
            doc = Product(id=f"w{k}", title="a new item", category="new", price=k, v=self.vecs[k % 4096])
            t0 = time.perf_counter()
            self.da.extend([doc])
            self.calls.append((t0, time.perf_counter() - t0))
            k += 1


def overlapping(calls: list, lo: float, hi: float) -> list:
    return [s for t0, s in calls if t0 < hi and t0 + s > lo]


def one(storage: str, tmp: str, args, rng) -> dict:
    path = f"{tmp}/{storage}" + (".db" if storage == "sqlite" else "")
    with hs.DocumentArray(Product, storage=storage, path=path) as da:
        fill(da, args.n, rng)
    da = hs.DocumentArray(Product, storage=storage, path=path)  # the snapshot mapped, then a log tail
    da.extend([Product(id=f"t{i}", title="tail", category="t", v=rng.standard_normal(DIM).astype(np.float32))
               for i in range(args.tail)])
    writer = Writer(da, rng)
    writer.start()
    time.sleep(args.normal)
    normal = [s for _, s in writer.calls]
    reports, windows = [], []
    for b in range(args.backups):
        lo = time.perf_counter()
        reports.append(da.backup(f"{tmp}/{storage}-backup{b}" + (".db" if storage == "sqlite" else "")))
        windows.append((lo, time.perf_counter()))
        time.sleep(0.2)
    writer.stop.set()
    writer.join()
    during = [s for lo, hi in windows for s in overlapping(writer.calls, lo, hi)]
    da.close()
    return {"storage": storage, "normal_median_ms": 1e3 * statistics.median(normal),
            "normal_max_ms": 1e3 * max(normal), "writes_during": len(during),
            "during_median_ms": 1e3 * statistics.median(during) if during else float("nan"),
            "during_max_ms": 1e3 * max(during) if during else float("nan"),
            "backup_s": statistics.median(r["seconds"] for r in reports),
            "stall_reported_ms": 1e3 * statistics.median(r["stall_seconds"] for r in reports),
            "stall_reported_max_ms": 1e3 * max(r["stall_seconds"] for r in reports),
            "mib": reports[-1]["bytes"] / 2**20, "documents": reports[-1]["documents"]}


def main(argv=None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="documents in the collection")
    ap.add_argument("--tail", type=int, default=1000, help="single-document writes logged after the snapshot")
    ap.add_argument("--normal", type=float, default=3.0, help="seconds of writes before the backups")
    ap.add_argument("--backups", type=int, default=5, help="backups taken while the writer goes on")
    ap.add_argument("--storages", default="memory,hnsw,sqlite", help="comma-separated")
    args = ap.parse_args(argv)
    out, facts = start("backup", args)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for storage in args.storages.split(","):
            r = one(storage, tmp, args, rng)
            rows.append(r)
            out.say(f"{storage}: done ({r['documents']:,} documents backed up)")
    out.say(f"\n{args.n:,} documents ({DIM}-d, a text, a keyword, an int) + {args.tail} logged writes; one "
            f"writer thread of single-document extend() calls; medians of {args.backups} backups")
    out.table(["storage", "backup s", "MiB", "stall reported ms (median / max)", "write ms normal (median / max)",
               "write ms during backup (median / max)", "writes during"],
              [[r["storage"], f"{r['backup_s']:.3f}", f"{r['mib']:.0f}", f"{r['stall_reported_ms']:.2f} / {r['stall_reported_max_ms']:.2f}",
                f"{r['normal_median_ms']:.2f} / {r['normal_max_ms']:.1f}",
                f"{r['during_median_ms']:.2f} / {r['during_max_ms']:.1f}", r["writes_during"]] for r in rows])
    out.save({"machine": facts, "config": vars(args), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
