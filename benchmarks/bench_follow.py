"""Readers that follow the writer (issue 32 item 1): what following costs a find when nothing
changed, and how soon another process sees a write.

1. Overhead. One collection with path= (N documents, DIM-d Gaussian vectors), opened three times in
   this process: by the writer, by a read_only=True follower (follow=True, the default) and by a
   read_only=True reader with follow=False. find(vector=q, limit=10) on each, each query on the
   three in turn, over --passes passes after a warm-up, so load from elsewhere falls on all
   three; medians of the single calls in microseconds. "follow overhead" is follower minus follow=False: the look at the files
   (two stats) that every read of a follower makes. Nothing is written meanwhile.
2. Staleness. A writer process appends one document every --interval seconds and prints the
   time.monotonic() (one clock for every process on Linux) at which each extend() returned; this
   process, a follower, reads in a loop (`id in ro`) and notes when each document first shows.
   Staleness = seen - returned: negative when the follower saw the record before the writer's
   fsync returned (the log's bytes are readable once written; what a reader sees is still a
   prefix of the log, one state the writer reached). Medians and p99 in milliseconds.

    python benchmarks/bench_follow.py                  # memory, hnsw (and sqlite)
    python benchmarks/bench_follow.py --storages hnsw --n 100000
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

DIM = 64


def item_schema():
    import hybridsearch as hs

    class Item(hs.Document):
        title: hs.Text = ""
        n: int = 0
        embedding: hs.Vector[DIM]

    return Item


def _path(root: str, storage: str) -> str:
    return os.path.join(root, "c.db" if storage == "sqlite" else storage)


def overhead(storage: str, n: int, passes: int, root: str) -> dict:
    import hybridsearch as hs
    Item = item_schema()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, DIM)).astype(np.float32)
    Q = rng.standard_normal((200, DIM)).astype(np.float32)
    path = _path(root, storage)
    w = hs.DocumentArray(Item, storage=storage, path=path)
    w.extend_columns({"id": [f"d{i}" for i in range(n)], "n": list(range(n)), "embedding": X})
    follower = hs.DocumentArray(Item, storage=storage, path=path, read_only=True)
    fixed = hs.DocumentArray(Item, storage=storage, path=path, read_only=True, follow=False)
    handles = {"writer": w, "follow=True": follower, "follow=False": fixed}
    assert follower.find(vector=Q[0], limit=10).ids == fixed.find(vector=Q[0], limit=10).ids
    times = {k: [] for k in handles}
    clock = time.perf_counter_ns
    for p in range(passes + 1):  # the first pass warms up
        for q in Q:  # each query on the three handles in turn: load from elsewhere falls on all three
            for name, da in handles.items():
                t = clock()
                da.find(vector=q, limit=10)
                if p:
                    times[name].append((clock() - t) / 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    # the same on the cheapest read there is, `id in da`, where the look at the files is most of it
    cheap = {k: [] for k in handles}
    for p in range(passes + 1):
        for i in range(len(Q)):
            for name, da in handles.items():
                t = clock()
                f"d{i}" in da
                if p:
                    cheap[name].append((clock() - t) / 1e3)
    cmed = {k: statistics.median(v) for k, v in cheap.items()}
    out = {**med, "follow overhead": med["follow=True"] - med["follow=False"],
           "contains": cmed, "contains overhead": cmed["follow=True"] - cmed["follow=False"],
           "refreshes": follower.stats()["follow"]["refreshes"]}
    for da in (follower, fixed, w):
        da.close()
    return out


_WRITER = r"""
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[4])
from benchmarks.bench_follow import item_schema
import hybridsearch as hs
storage, path, count, root, interval = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])
da = hs.DocumentArray(item_schema(), storage=storage, path=path)
print("ready", flush=True)
sys.stdin.readline()
v = np.ones(%d, dtype=np.float32)
for i in range(count):
    da.extend([{"id": f"s{i}", "n": i, "embedding": v}])
    print(i, repr(time.monotonic()), flush=True)
    time.sleep(interval)
da.close()
""" % DIM


def staleness(storage: str, count: int, interval: float, root: str) -> dict:
    import hybridsearch as hs
    path = _path(root, storage)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, storage, path, str(count), here, str(interval)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    ro = hs.DocumentArray(item_schema(), storage=storage, path=path, read_only=True)
    seen = {}
    proc.stdin.write("go\n")
    proc.stdin.flush()
    i = 0
    deadline = time.monotonic() + count * interval * 4 + 30
    while i < count and time.monotonic() < deadline:
        if f"s{i}" in ro:
            seen[i] = time.monotonic()
            i += 1
    out, _ = proc.communicate(timeout=120)
    returned = {int(a): float(b) for a, b in (line.split() for line in out.splitlines())}
    ro.close()
    lag = sorted((seen[k] - returned[k]) * 1e3 for k in seen if k in returned)
    return {"writes": len(lag), "median ms": statistics.median(lag),
            "p99 ms": lag[min(len(lag) - 1, int(len(lag) * 0.99))], "max ms": lag[-1],
            "seen before return": sum(x < 0 for x in lag) / len(lag)}


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--storages", default="memory,hnsw,sqlite")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--passes", type=int, default=15)
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--interval", type=float, default=0.01)
    args = ap.parse_args()
    print(f"# {machine()}; {time.strftime('%Y-%m-%d')}; n={args.n} x {DIM}, find(vector=q, limit=10)")
    for storage in args.storages.split(","):
        with tempfile.TemporaryDirectory() as root:
            o = overhead(storage, args.n, args.passes, root)
        with tempfile.TemporaryDirectory() as root:
            s = staleness(storage, args.writes, args.interval, root)
        print(f"{storage:7s} find us/call: writer {o['writer']:.1f}, follow=False {o['follow=False']:.1f}, "
              f"follow=True {o['follow=True']:.1f} -> follow overhead {o['follow overhead']:+.1f} us "
              f"(refreshes while timing: {o['refreshes']})")
        c = o["contains"]
        print(f"{storage:7s} `id in da` us/call: writer {c['writer']:.2f}, follow=False {c['follow=False']:.2f}, "
              f"follow=True {c['follow=True']:.2f} -> follow overhead {o['contains overhead']:+.2f} us")
        print(f"{storage:7s} staleness over {s['writes']} writes, one per {args.interval * 1e3:.0f} ms: median "
              f"{s['median ms']:.2f} ms, p99 {s['p99 ms']:.2f} ms, max {s['max ms']:.2f} ms; seen before the "
              f"writer's call returned: {s['seen before return']:.0%}")


if __name__ == "__main__":
    main()
