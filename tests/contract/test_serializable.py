"""Writes by condition are serializable on every embedded storage.

Within one DocumentArray object, concurrent calls behave as if they ran one at a time in some
order that respects real time (a call that returned before another started comes first): an
`update_many` or a `delete(filter=...)` changes exactly the documents its filter matches at its
place in that order, and reports that number. The regression tests race the two cases of the
issue; the property test runs seeded random programs of writes and reads on several threads and
searches for a serial order of the acknowledged calls that explains every return value and the
final state (and, for the file-backed storages, the state after reopening).
"""
import random
import threading
import time

from typing import Optional

import pytest

import hybridsearch as hs
from tests.conftest import DISK_OPTIONS, EMBEDDED, STORAGES, storage_fixture

# reopened from their files at the end of the property test
FILE_BACKED = {"memory-path": "memory", "hnsw-path": "hnsw", "hnsw-disk": "hnsw", "hnsw-rq": "hnsw",
               "sqlite": "sqlite", "qdrant-path": "qdrant", "annlite": "annlite"}


storage = storage_fixture(EMBEDDED)  # annlite in its child process, tests/storages/wrapped/test_annlite.py


class Job(hs.Document):
    status: hs.Keyword = "new"
    n: int = 0
    embedding: Optional[hs.Vector[2]] = None  # annlite needs a vector field; the tests write none


def _path(storage, tmp_path):
    """The files of a file-backed storage, so that the test can reopen them."""
    return tmp_path / ("jobs.db" if storage == "sqlite" else "jobs")


def _reopen(storage, tmp_path):
    """The file-backed collection opened again from its files, with the storage's options."""
    return hs.DocumentArray(Job, storage=FILE_BACKED[storage], path=_path(storage, tmp_path),
                            **DISK_OPTIONS.get(storage, {}))


def _open(make_da, storage, tmp_path):
    if storage in FILE_BACKED:
        return make_da(Job, path=_path(storage, tmp_path))
    return make_da(Job)


def _race(*calls):
    """Runs the calls on threads started together; -> their results (re-raises the first error)."""
    results, errors = [None] * len(calls), []
    start = threading.Barrier(len(calls))

    def run(n, call):
        start.wait()
        try:
            results[n] = call()
        except BaseException as e:  # noqa: BLE001 -- reported in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n, c)) for n, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _run_programs(da, programs: list, call) -> list:
    """Runs each program (a list of ops) on a thread of its own, all started together, each op by
    call(da, op) -> per thread [(op, result, began, ended)] (perf_counter seconds)."""
    history = [[] for _ in programs]

    def run(t):
        for op in programs[t]:
            began = time.perf_counter()
            result = call(da, op)
            history[t].append((op, result, began, time.perf_counter()))

    _race(*[lambda t=t: run(t) for t in range(len(programs))])
    return history


def _reset(da, docs):
    da.delete([d.id for d in da])
    da.extend(docs)


# ------------------------------------------------------------------ regressions
def test_an_update_many_and_a_delete_by_the_same_filter_are_serial(make_da, storage, tmp_path):
    """One thread keeps the pending documents, another deletes the pending ones. In either order the second finds none: both counts add up to 200, and what remains
    is exactly what the keep reported, all kept."""
    da = _open(make_da, storage, tmp_path)
    for round_ in range(8):
        _reset(da, [Job(id=f"j{i}", status="pending") for i in range(200)])
        kept, deleted = _race(lambda: da.update_many({"status": "pending"}, status="keep"),
                              lambda: da.delete(filter={"status": "pending"}))
        left = {d.id: d.status for d in da}
        assert (kept, deleted) in ((200, 0), (0, 200)), (round_, kept, deleted, len(left))
        assert len(left) == kept and set(left.values()) <= {"keep"}, (round_, kept, deleted, len(left))


def test_four_threads_claiming_the_same_documents_claim_each_once(make_da, storage, tmp_path):
    """Four update_many calls on the same filter: the first in the serial order claims all 200,
    the others find none pending; every document carries the claim of the thread that reported it."""
    da = _open(make_da, storage, tmp_path)
    for round_ in range(6):
        _reset(da, [Job(id=f"j{i}", status="pending") for i in range(200)])
        counts = _race(*[lambda t=t: da.update_many({"status": "pending"}, status=f"claimed-by-{t}")
                         for t in range(4)])
        stored = {}
        for d in da:
            stored[d.status] = stored.get(d.status, 0) + 1
        assert sum(counts) == 200 and sorted(counts) == [0, 0, 0, 200], (round_, counts)
        assert stored == {f"claimed-by-{t}": c for t, c in enumerate(counts) if c}, (round_, counts, stored)


# ------------------------------------------------------------- property test
IDS = [f"p{i}" for i in range(8)]
STATUSES = ["a", "b", "c"]


def _program(rnd: random.Random, thread: int, length: int) -> list:
    """Random calls of one thread; a write stamps n with a number of its own, so the final state
    tells writes apart."""
    ops = []
    for k in range(length):
        stamp = 1000 * (thread + 1) + k
        kind = rnd.choice(["update_many", "update_many", "delete_filter", "delete_ids", "update", "extend",
                           "find", "count"])
        if kind == "update_many":
            ops.append((kind, rnd.choice(STATUSES), rnd.choice(STATUSES), stamp))
        elif kind in ("delete_filter", "find", "count"):
            ops.append((kind, rnd.choice(STATUSES)))
        elif kind == "delete_ids":
            ops.append((kind, tuple(rnd.sample(IDS, rnd.randint(1, 3)))))
        elif kind == "update":
            ops.append((kind, rnd.choice(IDS), rnd.choice(STATUSES), stamp))
        else:
            ops.append((kind, tuple((i, rnd.choice(STATUSES), stamp) for i in rnd.sample(IDS, rnd.randint(1, 2)))))
    return ops


def _call(da, op):
    """Runs one call on the DocumentArray -> its comparable result."""
    kind = op[0]
    if kind == "update_many":
        return da.update_many({"status": op[1]}, status=op[2], n=op[3])
    if kind == "delete_filter":
        return da.delete(filter={"status": op[1]})
    if kind == "delete_ids":
        return da.delete(list(op[1]))
    if kind == "update":
        try:
            da.update(op[1], status=op[2], n=op[3])
            return "ok"
        except KeyError:
            return "absent"
    if kind == "extend":
        da.extend([Job(id=i, status=s, n=n) for i, s, n in op[1]])
        return None
    if kind == "find":
        return sorted(da.find(filter={"status": op[1]}, limit=None).ids)
    return da.count(filter={"status": op[1]})


def _model(state: dict, op) -> tuple:
    """The serial model: (the new state, the call's result). state: id -> (status, n)."""
    kind = op[0]
    if kind == "update_many":
        hit = [i for i, (s, _) in state.items() if s == op[1]]
        return {**state, **{i: (op[2], op[3]) for i in hit}}, len(hit)
    if kind == "delete_filter":
        keep = {i: v for i, v in state.items() if v[0] != op[1]}
        return keep, len(state) - len(keep)
    if kind == "delete_ids":
        keep = {i: v for i, v in state.items() if i not in op[1]}
        return keep, len(state) - len(keep)
    if kind == "update":
        if op[1] not in state:
            return state, "absent"
        return {**state, op[1]: (op[2], op[3])}, "ok"
    if kind == "extend":
        return {**state, **{i: (s, n) for i, s, n in op[1]}}, None
    if kind == "find":
        return state, sorted(i for i, (s, _) in state.items() if s == op[1])
    return state, sum(1 for s, _ in state.values() if s == op[1])


def _serial_order(start: dict, history: list, final: dict, model=None):
    """A serial order of the calls (history: per thread, [(op, result, began, ended)]) that keeps
    each thread's order and real time (a call that ended before another began comes first) and
    gives every call its result and the final state; None if there is none. Depth-first, cut as
    soon as a result differs. `model(state, op)` -> (new state, result): _model by default."""
    model = model or _model
    threads = len(history)

    def search(state, at, order):
        if all(at[t] == len(history[t]) for t in range(threads)):
            return order if state == final else None
        for t in range(threads):
            if at[t] == len(history[t]):
                continue
            op, result, began, _ = history[t][at[t]]
            # not before a call of another thread that ended before this one began
            if any(at[u] < len(history[u]) and history[u][at[u]][3] < began for u in range(threads) if u != t):
                continue
            after, want = model(state, op)
            if want != result:
                continue
            found = search(after, at[:t] + (at[t] + 1,) + at[t + 1:], order + [(t, op, result)])
            if found is not None:
                return found
        return None

    return search(start, (0,) * threads, [])


def _state(da) -> dict:
    return {d.id: (d.status, d.n) for d in da}


def test_concurrent_calls_equal_some_serial_order(make_da, storage, tmp_path):
    """Three threads run seeded random programs of update_many, delete by filter and by ids,
    update, extend, find and count on one collection; their results and the final state must be
    those of some serial order of the calls (the model: a dict), round after round; a file-backed
    collection reopens in the final state."""
    da = _open(make_da, storage, tmp_path)
    for round_ in range(12):
        rnd = random.Random(round_)
        start = {i: (rnd.choice(STATUSES), 0) for i in IDS[:6]}
        _reset(da, [Job(id=i, status=s, n=n) for i, (s, n) in start.items()])
        assert _state(da) == start
        history = _run_programs(da, [_program(rnd, t, 4) for t in range(3)], _call)
        final = _state(da)
        order = _serial_order(start, history, final)
        assert order is not None, (f"round {round_}: no serial order of these calls gives their results "
                                   f"and the final state", start, history, final)
    if storage in FILE_BACKED:
        da.close()
        with _reopen(storage, tmp_path) as again:
            assert _state(again) == final


@pytest.mark.parametrize("storage", [s for s in FILE_BACKED if s in STORAGES], indirect=True)
def test_concurrent_extends_keep_one_insertion_order_also_after_reopening(make_da, storage, tmp_path):
    """Threads adding new documents at once: the collection lists them in one insertion order,
    and reopening its files lists them in the same order (concurrent batches never share an
    insertion number)."""
    da = _open(make_da, storage, tmp_path)

    def writer(t):
        for k in range(15):
            da.extend([Job(id=f"t{t}-{k}-{j}", n=j, embedding=[1.0, j]) for j in range(20)])

    _race(*[lambda t=t: writer(t) for t in range(3)])
    order = [d.id for d in da]
    assert len(order) == 900
    assert all(list(d.embedding) == [1.0, float(d.n)] for d in da)  # the growths kept every vector
    da.close()
    with _reopen(storage, tmp_path) as again:
        assert [d.id for d in again] == order
        assert all(list(d.embedding) == [1.0, float(d.n)] for d in again)


def test_a_reader_never_sees_half_of_a_write(make_da, storage, tmp_path):
    """Counts and finds racing update_many calls that move 2,600 documents (more than qdrant writes
    in one request) between two statuses: every answer is all or none of them."""
    da = _open(make_da, storage, tmp_path)
    da.extend([Job(id=f"j{i}", status="a") for i in range(2600)])
    seen, stop = set(), threading.Event()

    def reader():
        while not stop.is_set():
            seen.add(da.count(filter={"status": "a"}))
            seen.add(len(da.find(filter={"status": "b"}, limit=None).ids))

    def writer():
        try:
            for k in range(4):
                assert da.update_many({"status": "ab"[k % 2]}, status="ba"[k % 2]) == 2600
        finally:
            stop.set()

    _race(reader, writer)
    assert seen <= {0, 2600}, sorted(seen)
