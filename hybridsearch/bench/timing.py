"""How the harness times things: warm-up first, several passes taken in turns by the compared
functions (so load from elsewhere on a shared machine falls on all of them alike), the median
pass for QPS and the spread of the passes, every call for p50 / p99; whole sweeps interleaved
engine by engine; CPU time of this process or of another one (a search
node) from /proc; the resident set size."""
from __future__ import annotations

import ctypes
import gc
import os
import time
from collections.abc import Callable, Sequence

from hybridsearch.bench.metrics import median, percentile, spread


def round_robin(fns: dict, items: Sequence, warmup: Sequence | None = None, passes: int = 3,
                keep: bool = False) -> dict:
    """Times every fn(item) of `fns` (name -> callable) over `items`, one call per item.

    `items` (and `warmup`) may instead be a dict name -> sequence: each function gets its own
    form of the same inputs (e.g. a row or a (1, d) block), with no wrapper call in the timed loop.
    Each function first runs `warmup` (default: the first fifth of `items`); then `passes`
    passes, the functions taking turns within each pass. Returns name -> {"qps" (of the median
    pass), "p50_ms", "p99_ms" (over every timed call), "cpu_per_wall" (cores this process used),
    "out" (the outputs of the last pass, with keep=True)}, or name -> {"error": ...} for a
    function that raised during its warm-up (the others are still timed)."""
    each = {n: items[n] if isinstance(items, dict) else items for n in fns}
    if warmup is None:
        warm = {n: each[n][: max(1, len(each[n]) // 5)] for n in fns}
    else:
        warm = {n: warmup[n] if isinstance(warmup, dict) else warmup for n in fns}
    live, result = {}, {}
    for name, fn in fns.items():
        try:
            for a in warm[name]:
                fn(a)
            live[name] = fn
        except Exception as e:  # noqa: BLE001 -- one broken function must not hide the others
            result[name] = {"error": f"{type(e).__name__}: {e}"}
    walls = {n: [] for n in live}
    cpus = {n: 0.0 for n in live}
    lat = {n: [] for n in live}
    outs: dict = {}
    gc.collect()
    clock = time.perf_counter
    for _ in range(passes):
        for name, fn in live.items():
            out, add, record = [], lat[name].append, keep
            c0, t0 = time.process_time(), clock()
            for a in each[name]:
                t = clock()
                r = fn(a)
                add(clock() - t)
                if record:
                    out.append(r)
            walls[name].append(clock() - t0)
            cpus[name] += time.process_time() - c0
            outs[name] = out
    for name in live:
        wall = median(walls[name])
        result[name] = {"qps": len(each[name]) / wall if wall > 0 else float("nan"),
                        "p50_ms": 1000 * percentile(lat[name], 50), "p99_ms": 1000 * percentile(lat[name], 99),
                        "cpu_per_wall": cpus[name] / sum(walls[name]) if sum(walls[name]) > 0 else float("nan")}
        if keep:
            result[name]["out"] = outs[name]
    return result


def interleaved(makers: dict, points: Sequence, items, warmup=None, passes: int = 3, min_seconds: float = 0.0,
                loadavg: Callable[[], float] | None = None) -> dict:
    """Times sweeps of several engines in interleaved passes: pass 1 is engine A's whole sweep,
    then B's, ...; pass 2 again A's, B's, ... (so a burst of load from elsewhere lands on one
    pass of every engine, not on one engine's whole sweep, and the spread over passes shows it).

    `makers`: name -> make(point) -> a function of one item (made afresh before every timed
    segment, as an index's searcher may set state such as ef on the index it shares); `items`
    (and `warmup`, default the first fifth of the items) a sequence, or a dict name -> sequence.
    Each segment is a warm-up then the items, repeated whole until `min_seconds` have passed
    (short segments are at the mercy of one scheduler tick). `loadavg()` (default:
    load_average, the machine's 1-minute load average) is read before every segment.

    Returns name -> one dict per point: {"qps" (median over passes), "qps_min", "qps_max",
    "qps_q1", "qps_q3", "qps_passes" (one per pass, in order), "p50_ms", "p99_ms" (over every
    timed call), "load1" (the highest reading before its segments), "out" (the outputs of the
    items' first round in the first pass)}, or {"error": ...} for a point whose function raised
    (the other points and engines are still timed)."""
    read_load = loadavg or load_average
    each = {n: items[n] if isinstance(items, dict) else items for n in makers}
    if warmup is None:
        warm = {n: each[n][: max(1, len(each[n]) // 5)] for n in makers}
    else:
        warm = {n: warmup[n] if isinstance(warmup, dict) else warmup for n in makers}
    state = {n: [{"qps": [], "lat": [], "load": [], "out": None, "error": None} for _ in points] for n in makers}
    clock = time.perf_counter
    gc.collect()
    for _ in range(passes):
        for name, make in makers.items():
            for i, point in enumerate(points):
                st = state[name][i]
                if st["error"]:
                    continue
                st["load"].append(read_load())
                try:
                    fn = make(point)
                    for a in warm[name]:
                        fn(a)
                    calls, add, first = 0, st["lat"].append, st["out"] is None
                    out = []
                    t0 = clock()
                    while True:
                        for a in each[name]:
                            t = clock()
                            r = fn(a)
                            add(clock() - t)
                            if first:
                                out.append(r)
                        calls += len(each[name])
                        first = False
                        wall = clock() - t0
                        if wall >= min_seconds:
                            break
                    st["qps"].append(calls / wall if wall > 0 else float("nan"))
                    if st["out"] is None:
                        st["out"] = out
                except Exception as e:  # noqa: BLE001 -- one broken engine or point must not hide the others
                    st["error"] = f"{type(e).__name__}: {e}"
    result = {}
    for name in makers:
        result[name] = []
        for st in state[name]:
            if st["error"]:
                result[name].append({"error": st["error"]})
                continue
            s = spread(st["qps"])
            result[name].append({"qps": s["median"], "qps_min": s["min"], "qps_max": s["max"], "qps_q1": s["q1"],
                                 "qps_q3": s["q3"], "qps_passes": st["qps"],
                                 "p50_ms": 1000 * percentile(st["lat"], 50), "p99_ms": 1000 * percentile(st["lat"], 99),
                                 "load1": max((x for x in st["load"] if x is not None), default=None),
                                 "out": st["out"]})
    return result


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the platform has none)."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def timed(fn: Callable, items: Sequence, passes: int = 3, warmup: Sequence | None = None) -> dict:
    """round_robin of one function: {"qps", "p50_ms", "p99_ms", "cpu_per_wall"}; raises what fn raises."""
    r = round_robin({"fn": fn}, items, warmup, passes)["fn"]
    if "error" in r:
        raise RuntimeError(r["error"])
    return r


def median_seconds(fn: Callable, repeats: int) -> float:
    """Median wall seconds of fn() over `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return median(times)


def process_cpu_seconds(pid: int | None) -> float:
    """utime + stime of another process in seconds, from /proc/<pid>/stat (0.0 for None)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuClock:
    """A context manager: wall seconds (`wall`), this process's CPU seconds (`cpu`) and another
    process's (`other_cpu`, e.g. a search node's) over the block; `used` is the CPU that did the
    work (the other process's when a pid is given, else this one's)."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid

    def __enter__(self) -> CpuClock:
        self.w0, self.c0, self.o0 = time.perf_counter(), time.process_time(), process_cpu_seconds(self.pid)
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0
        self.other_cpu = process_cpu_seconds(self.pid) - self.o0
        self.used = self.other_cpu if self.pid is not None else self.cpu


def settle(pid: int | None, quiet: float = 0.05, limit: float = 120.0) -> tuple:
    """Waits until process `pid` uses less than `quiet` cores over a second (a search node's
    merges after a feed would otherwise be billed to the next workload) -> (cores it used in
    the last second, seconds waited); (0.0, 0.0) at once for None."""
    if pid is None:
        return 0.0, 0.0
    t0 = time.perf_counter()
    while True:
        c = process_cpu_seconds(pid)
        time.sleep(1.0)
        used = process_cpu_seconds(pid) - c
        if used < quiet or time.perf_counter() - t0 > limit:
            return used, time.perf_counter() - t0


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def release_free_heap() -> None:
    """Collects garbage and returns freed heap to the OS (glibc malloc_trim), so that an RSS
    difference around a build shows what the build allocated."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
