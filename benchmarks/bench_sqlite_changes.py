"""What the sqlite storage's change tracking (storages/local/sqlite/follow.py) costs the writer.

The writer fills a new table of --n documents (DIM-d vectors, a text, a keyword, an int) by
extend_columns() in batches of --batch, then runs update_many over every row (one transaction),
then deletes every tenth document by id; rows per second, best of --repeat, in CPU time of this
process (the machine's other load falls less on it than on wall time; SQLite works in this
process, and the WAL writes are not fsynced per commit with synchronous=NORMAL). Run it once
with this checkout and once with one before change tracking on PYTHONPATH, and compare.

    python benchmarks/bench_sqlite_changes.py --n 100000
"""
import argparse
import os
import platform
import tempfile
import time

import numpy as np

DIM = 64


def run(n: int, batch: int, root: str) -> dict:
    import hybridsearch as hs

    class Item(hs.Document):
        title: hs.Text = ""
        kind: hs.Keyword = "a"
        n: int = 0
        embedding: hs.Vector[DIM]

    path = os.path.join(root, "c.db")
    for suffix in ("", "-wal", "-shm", "-documents.hslock"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, DIM)).astype(np.float32)
    out = {}
    with hs.DocumentArray(Item, storage="sqlite", path=path) as w:
        t = time.process_time()
        for i in range(0, n, batch):
            j = min(n, i + batch)
            w.extend_columns({"id": [f"d{k}" for k in range(i, j)], "title": [f"item {k} words" for k in range(i, j)],
                              "kind": ["abc"[k % 3] for k in range(i, j)], "n": list(range(i, j)),
                              "embedding": X[i:j]})
        out["extend"] = n / (time.process_time() - t)
        t = time.process_time()
        w.update_many({"n": {"$gte": 0}}, n=-1, kind="z")
        out["update_many"] = n / (time.process_time() - t)
        ids = [f"d{k}" for k in range(0, n, 10)]
        t = time.process_time()
        w.delete(ids)
        out["delete"] = len(ids) / (time.process_time() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import hybridsearch
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, n={args.n}, batch={args.batch}, "
          f"hybridsearch from {os.path.dirname(hybridsearch.__file__)}")
    best: dict = {}
    with tempfile.TemporaryDirectory() as root:
        for _ in range(args.repeat):
            for k, v in run(args.n, args.batch, root).items():
                best[k] = max(best.get(k, 0), v)
    for k, v in best.items():
        print(f"{k:12s} {v:10,.0f} rows/s")


if __name__ == "__main__":
    main()
