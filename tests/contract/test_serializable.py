"""Writes by condition are serializable on every embedded storage (issue 28, item 2).

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

import pytest

import hybridsearch as hs
from tests.conftest import STORAGES

EMBEDDED = ["memory", "memory-path", "hnsw", "hnsw-path", "hnsw-f32", "hnswlib", "sqlite", "qdrant",
            "qdrant-path", "qdrant-client", "annlite"]
# reopened from their files at the end of the property test
FILE_BACKED = {"memory-path": "memory", "hnsw-path": "hnsw", "sqlite": "sqlite", "qdrant-path": "qdrant",
               "annlite": "annlite"}


@pytest.fixture(params=[s for s in EMBEDDED if s in STORAGES])
def storage(request):
    """The embedded storages (annlite in its child process, tests/storages/wrapped/test_annlite.py)."""
    return request.param


class Job(hs.Document):
    status: hs.Keyword = "new"
    n: int = 0


def _path(storage, tmp_path):
    """The files of a file-backed storage, so that the test can reopen them."""
    return tmp_path / ("jobs.db" if storage == "sqlite" else "jobs")


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


def _reset(da, docs):
    da.delete([d.id for d in da])
    da.extend(docs)


# ------------------------------------------------------------------ regressions
def test_an_update_many_and_a_delete_by_the_same_filter_are_serial(make_da, storage, tmp_path):
    """The issue's case: one thread keeps the pending documents, another deletes the pending
    ones. In either order the second finds none: both counts add up to 200, and what remains
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
