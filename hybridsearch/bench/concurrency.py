"""The two concurrency loops of the harness: client threads sharing a list of queries (QPS,
latency and CPU cores used at 1, 2, 4... clients), and readers running for a fixed time with or
without writers beside them."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from hybridsearch.bench.metrics import percentile, qps_per_core
from hybridsearch.bench.timing import CpuClock


def _start_all(threads: list) -> None:
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def concurrent(fn: Callable, items: Sequence, threads: int, pid: int | None = None) -> dict:
    """fn(item) for every item, split over `threads` client threads (thread i takes items
    i, i + threads, ...), after a warm-up on the first tenth. Returns qps, cores (CPU seconds per
    wall second: this process's, or process `pid`'s when the work happens in a search node),
    qps_per_core, client_cores (this process), threads, mean_ms, p50_ms and p99_ms per call."""
    for a in items[: max(1, len(items) // 10)]:
        fn(a)
    lat, lock = [], threading.Lock()

    def worker(part):
        mine = []
        for a in part:
            t = time.perf_counter()
            fn(a)
            mine.append(time.perf_counter() - t)
        with lock:
            lat.extend(mine)

    with CpuClock(pid) as c:
        _start_all([threading.Thread(target=worker, args=(items[i::threads],)) for i in range(threads)])
    r = qps_per_core(len(items), c.wall, c.used)
    r.update({"threads": threads, "client_cores": c.cpu / c.wall if c.wall > 0 else float("nan"),
              "mean_ms": 1000 * float(np.mean(lat)), "p50_ms": 1000 * percentile(lat, 50),
              "p99_ms": 1000 * percentile(lat, 99)})
    return r


def readers_and_writers(read: Callable, write: Callable, readers: int, writers: int, seconds: float) -> tuple:
    """`readers` threads call read(i, k) and `writers` threads write(i, k) in closed loops
    (k = 0, 1, ... per thread; i = the thread's number) for `seconds` of wall time, all
    starting together. Only calls finished inside the window count. Returns (read latencies in
    seconds as an array, writes completed); the first exception of any thread is raised."""
    lat = [[] for _ in range(readers)]
    writes = [0] * writers
    errors = []
    start = threading.Barrier(readers + writers + 1)
    window = {}

    def reader(i: int) -> None:
        out, k = lat[i], 0
        start.wait()
        end = window["end"]
        while True:
            t0 = time.perf_counter()
            if t0 >= end:
                return
            read(i, k)
            t1 = time.perf_counter()
            if t1 <= end:
                out.append(t1 - t0)
            k += 1

    def writer(i: int) -> None:
        k = 0
        start.wait()
        end = window["end"]
        while time.perf_counter() < end:
            write(i, k)
            if time.perf_counter() <= end:
                writes[i] += 1
            k += 1

    def guarded(fn, i):
        try:
            fn(i)
        except BaseException as e:  # noqa: BLE001 - raised after the window
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(reader, i)) for i in range(readers)]
    threads += [threading.Thread(target=guarded, args=(writer, i)) for i in range(writers)]
    for t in threads:
        t.start()
    window["end"] = time.perf_counter() + seconds
    start.wait()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return np.concatenate([np.asarray(x) for x in lat]) if readers else np.empty(0), sum(writes)
