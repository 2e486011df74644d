"""Running one benchmark row in a fresh process: annlite and hnswlib cannot share one (both
register a native class named Index), and a fresh process keeps one row's memory and caches
from the next row's."""
from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor


def in_child(fn, *args, **kwargs):
    """fn(*args, **kwargs) in a freshly spawned process -> its result, or {"error": ...} when
    it raised or the process died (a crashed row is reported, never fatal to the run)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        try:
            return pool.submit(fn, *args, **kwargs).result()
        except Exception as e:  # noqa: BLE001 -- whatever the row raised is its report
            return {"error": f"{type(e).__name__}: {e}"}
