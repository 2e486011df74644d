"""Readers that follow the writer (issue 32 item 1, API.md section 2): a read_only=True collection
with follow=True (the default) sees every write the writer acknowledged before the read, each
read sees one state the writer reached, and its view never goes back. Spawned writer processes
(tests/contract/test_crash.py's deterministic writers, whose calls the plain-dict model replays);
public API only.
"""
import os
import signal
import threading
import time

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import DISK_OPTIONS
from tests.contract.test_crash import READ_ONLY, Doc, _model, acks, doc, open_da, start_writer, state


class States:
    """The model's states after 0, 1, 2, ... calls of a writer, grown on demand: which call
    counts a seen state can be."""

    def __init__(self, op: str) -> None:
        self.gen = _model(op, 100_000)
        self.at: dict = {}
        self.n = -1

    def counts(self, seen: dict, upto: int) -> list:
        while self.n < upto:
            self.n += 1
            self.at.setdefault(frozenset(next(self.gen).items()), []).append(self.n)
        return self.at.get(frozenset(seen.items()), [])


def _path(storage, tmp_path, name="c"):
    return tmp_path / (f"{name}.db" if storage == "sqlite" else name)


class Acks:
    """The calls a writer process has acknowledged so far (its stdout, read without blocking)."""

    def __init__(self, proc) -> None:
        self.proc, self.buf, self.n = proc, b"", 0
        os.set_blocking(proc.stdout.fileno(), False)

    def now(self) -> int:
        self.buf += self.proc.stdout.read() or b""
        done, _, self.buf = self.buf.rpartition(b"\n")  # a line cut by the read waits for its end
        self.n = max([self.n] + acks(done))
        return self.n


# "close": the writer closes and reopens every other call, so the follower meets new generations
# (a snapshot replacing the log) as well as appended records
@pytest.mark.parametrize("op", ["mixed", "close"])
@pytest.mark.parametrize("storage", READ_ONLY)
def test_a_follower_sees_every_acknowledged_write_in_one_state_per_read(storage, op, tmp_path):
    path = _path(storage, tmp_path)
    proc = start_writer(storage, path, op)
    states, acked, reads = States(op), Acks(proc), []
    try:
        with open_da(storage, path, read_only=True) as ro:
            last = 0
            # 20 s, and up to 120 s for the first 10 reads: under "close" every read may open a new
            # generation, whose snapshot grows with the writer's calls (~1.6 s per read on two busy
            # cores, ~2.5 s after 1,600 calls: 8 reads in 20 s in a CI rehearsal)
            start = time.monotonic()
            while (len(reads) < 10 and time.monotonic() < start + 120) or \
                    (time.monotonic() < start + 20 and (len(reads) < 20 or acked.now() < 30)):
                time.sleep(0.002)
                before = acked.now()
                seen = state(ro)  # one read (fewer documents than a page of get)
                after = acked.now()
                ks = [k for k in states.counts(seen, after + 1) if k >= max(before, last)]
                assert ks, (f"read {len(reads)}: {len(seen)} documents are not a state after {before} or more "
                            f"acknowledged calls (the view was at call {last})")
                last = ks[0]
                reads.append(last)
                assert proc.poll() is None, f"the writer stopped: {proc.communicate()[1][-3000:]}"
            assert len(reads) >= 10 and acked.now() >= 10, (len(reads), acked.now())
            # the reads went forward with the writer, not only at the end
            assert len(set(reads)) >= 3, reads
    finally:
        proc.kill()
        proc.communicate(timeout=60)


@pytest.mark.parametrize("storage", READ_ONLY)
def test_refresh_applies_only_the_new_writes_and_follow_false_keeps_the_view(storage, tmp_path):
    path = _path(storage, tmp_path)
    with open_da(storage, path) as w:
        w.extend([doc(f"d{i}", i, "a", 0) for i in range(50)])
        fixed = open_da(storage, path, read_only=True, follow=False)
        live = open_da(storage, path, read_only=True)
        assert fixed.refresh() == 0 and live.refresh() == 0  # nothing new yet
        w.extend([doc("n1", 1, "b", 1)])
        w.update("d3", price=-3)
        w.delete(["d4"])
        w.update_many({"category": "b"}, price=77)
        assert len(fixed) == 50 and "n1" not in fixed and fixed["d3"].price == 3  # the view of its open
        assert "n1" in live and live["d3"].price == -3 and "d4" not in live and live["n1"].price == 77
        before = live.stats()["follow"]
        applied = fixed.refresh()
        # memory / hnsw: the four logged writes, not the collection; sqlite: the changes to rows
        # (n1, d3, d4 and n1 again: counted once per id or once per write)
        assert applied in ({4} if storage != "sqlite" else {3, 4}), applied
        assert fixed.stats()["follow"]["follow"] is False and live.stats()["follow"]["follow"] is True
        assert before["refreshes"] >= 1
        assert state(fixed) == state(live) == state(w)
        assert fixed.refresh() == 0 and live.refresh() == 0
        # a write is found by every kind of read of the follower at once
        q = np.ones(4, dtype=np.float32)
        w.extend([dict(doc("n2", 5, "c", 2), title="zebra crossing", embedding=q)])
        assert live.find(text="zebra").ids == ["n2"]
        assert live.find(vector=q, limit=1).ids == ["n2"]
        assert live.count(filter={"category": "c"}) == len(w.find(filter={"category": "c"}, limit=None).ids)
        fixed.close()
        live.close()


@pytest.mark.parametrize("storage", READ_ONLY)
def test_a_follower_beside_a_writer_killed_mid_write_then_a_new_writer(storage, tmp_path):
    """kill -9 of the writer: the follower holds every acknowledged call (and at most the one in
    flight, all or nothing); a new writer then takes over, and the follower follows it too."""
    path = _path(storage, tmp_path)
    proc = start_writer(storage, path, "extend_columns")
    states = States("extend_columns")
    with open_da(storage, path, read_only=True) as ro:
        acked = Acks(proc)
        deadline = time.monotonic() + 0.3 + (os.getpid() % 7) / 10
        while time.monotonic() < deadline:
            ro.count()  # following while the writer writes
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        n = max([acked.n] + acks(acked.buf + out))
        seen = state(ro)
        assert [k for k in states.counts(seen, n + 1) if k >= n], f"{n} acknowledged; the follower saw another state"
        with open_da(storage, path) as w:  # the next writer (a torn tail is dropped now)
            assert state(w) == seen  # the follower saw what the files hold
            w.extend([doc("after", 1, "a", 1)])
            assert "after" in ro and len(ro) == len(seen) + 1


def one_read(da) -> dict:
    """state() in one call of the API (iteration reads ids, then documents: two reads, between
    which another thread's catching up may apply writes)."""
    cols = da.to_columns(fields=["id", "title", "category", "price"])
    return {i: (t, c, int(p)) for i, t, c, p in zip(cols["id"], cols["title"], cols["category"], cols["price"])}


@pytest.mark.parametrize("op", ["mixed", "close"])
@pytest.mark.parametrize("storage", READ_ONLY)
def test_threads_sharing_one_follower_each_see_every_acknowledged_write(storage, op, tmp_path):
    """Several threads share one follower while the writer (another process) writes and, with
    "close", takes snapshots: each read is one state the writer reached, holding every call
    acknowledged before the read began."""
    path = _path(storage, tmp_path)
    proc = start_writer(storage, path, op)
    states, problems, lock = States(op), [], threading.Lock()
    try:
        with open_da(storage, path, read_only=True) as ro:
            acked = Acks(proc)
            stop = time.monotonic() + 2.5

            def reader():
                while time.monotonic() < stop and not problems:
                    with lock:
                        before = acked.now()
                    seen = one_read(ro)
                    with lock:
                        ks = states.counts(seen, acked.now() + 1)
                        if not any(k >= before for k in ks):
                            problems.append((len(seen), before, ks[-3:]))

            threads = [threading.Thread(target=reader) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not problems, f"reads that are no state, or miss an acknowledged call: {problems[:5]}"
            assert acked.now() >= 5
    finally:
        proc.kill()
        proc.communicate(timeout=60)


class Vec(hs.Document):
    embedding: hs.Vector[4]


@pytest.mark.parametrize("storage", READ_ONLY)
def test_the_plain_vector_find_follows_too(storage, tmp_path):
    """find(vector=q, limit=k) alone takes the native path of a required vector field: it
    catches up first like every other read."""
    path = _path(storage, tmp_path)
    name = {"memory-path": "memory", "hnsw-path": "hnsw", "hnsw-disk": "hnsw", "hnsw-rq": "hnsw"}.get(storage, storage)
    disk = DISK_OPTIONS.get(storage, {})
    with hs.DocumentArray(Vec, storage=name, path=path, **disk) as w:
        w.extend([{"id": "a", "embedding": [1, 0, 0, 0]}])
        with hs.DocumentArray(Vec, storage=name, path=path, read_only=True, **disk) as ro:
            assert ro.find(vector=[0, 1, 0, 0], limit=1).ids == ["a"]
            for i, v in enumerate(([0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1])):
                w.extend([{"id": f"n{i}", "embedding": v}])
                assert ro.find(vector=v, limit=1).ids == [f"n{i}"]  # the first read after the write


def _held(path) -> tuple:
    """(descriptors, mappings) this process holds on files under `path`."""
    where = os.fspath(path)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += os.readlink(f"/proc/self/fd/{fd}").startswith(where)
        except OSError:
            pass
    with open("/proc/self/maps") as f:
        maps = sum(where in line for line in f)
    return fds, maps


@pytest.mark.parametrize("storage", [s for s in READ_ONLY if s != "sqlite"])
def test_new_generations_do_not_pile_up_in_a_follower(storage, tmp_path):
    """Each snapshot the writer takes is a new generation the follower opens: the old one's
    descriptors and mapping go at once, and close() gives back the rest."""
    path = _path(storage, tmp_path)
    w = open_da(storage, path)
    w.extend([doc("a", 1, "a", 0)])
    ro = open_da(storage, path, read_only=True)
    w.close()
    w = open_da(storage, path)  # a generation with a snapshot, for both
    assert "a" in ro
    base = _held(path)
    for i in range(12):
        w.close()  # a snapshot: a new generation
        w = open_da(storage, path)
        w.extend([doc(f"x{i}", i, "b", i)])
        assert f"x{i}" in ro
        if i == 0 and storage in DISK_OPTIONS:
            # the first growth of each opener (the writer, the follower): the vectors' scratch file,
            # its descriptor and the mapping's own (mmap keeps a duplicate), and the mapping
            assert _held(path) == (base[0] + 4, base[1] + 2), (_held(path), base)
            base = _held(path)
        assert _held(path) == base, (i, _held(path), base)
    assert ro.stats()["follow"]["generations_opened"] >= 12
    w.close()
    ro.close()
    assert _held(path) == (0, 0)


_READER = r"""
import sys, time
from tests.contract.test_crash import open_da
ro = open_da(sys.argv[1], sys.argv[2], read_only=True)
print("ready", flush=True)
while True:
    print(len(ro), flush=True)
"""


@pytest.mark.parametrize("storage", READ_ONLY)
def test_a_follower_killed_while_it_catches_up_harms_nothing(storage, tmp_path):
    """kill -9 of follower processes in the middle of their catching up: the writer goes on, its
    files are only its own, and a new follower sees every write."""
    import random
    import subprocess
    import sys
    from tests.contract.test_crash import ROOT
    path = _path(storage, tmp_path)
    with open_da(storage, path) as w:
        w.extend([doc(f"d{i}", i, "a", 0) for i in range(100)])
        rng = random.Random()
        for trial in range(3):
            proc = subprocess.Popen([sys.executable, "-c", _READER, storage, str(path)], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert proc.stdout.readline().strip() == b"ready", proc.communicate()[1][-2000:]
            stop = time.monotonic() + rng.uniform(0.05, 0.4)
            k = 0
            while time.monotonic() < stop:  # writes the follower is catching up with
                w.extend([doc(f"t{trial}_{k}", k, "b", trial)])
                k += 1
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            w.update_many({"category": "b"}, price=trial)
        want = state(w)
    with open_da(storage, path, read_only=True) as ro:
        assert state(ro) == want
    with open_da(storage, path) as again:
        assert state(again) == want
