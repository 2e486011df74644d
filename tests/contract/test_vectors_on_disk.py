"""storage="hnsw" with vectors_on_disk=True: the float32 block lives in a file, the answers do not
change. Public API only.

The whole contract suite runs on it too ("hnsw-disk" in tests/conftest.py, with the kill -9 and
follower tests of test_crash.py / test_follow.py); the tests here check what those do not: the
vectors themselves (read back, exact scores and rankings against numpy) across growths of the
block, rewrites, deletes and reopens, and across kill -9 of a writer.
"""
import ctypes
import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import STORAGES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif("hnsw-disk" not in STORAGES, reason="HS_TEST_STORAGES leaves out hnsw-disk")
DIM = 6


class Vec(hs.Document):
    v: hs.Vector[DIM]
    n: int = 0


def vector(key: str, k: int) -> np.ndarray:
    """The vector call k gives document `key`: deterministic, so a child's writes can be modelled."""
    rng = np.random.default_rng([k, int(key[1:])])
    return rng.standard_normal(DIM).astype(np.float32)


def open_disk(path, **options):
    return hs.DocumentArray(Vec, storage="hnsw", path=path, vectors_on_disk=True, metric="l2", **options)


def check(da, model: dict, rng, ties: bool = False) -> None:
    """Every document's vector is the model's, bit for bit, and an exact find ranks as numpy
    (`ties`: documents share vectors, so only the scores and each hit's own distance are compared)."""
    assert len(da) == len(model)
    for key, (vec, n) in model.items():
        got = da[key]
        assert got.n == n and np.array_equal(np.asarray(got.v, dtype=np.float32), vec), key
    if not model:
        return
    keys = sorted(model)
    X = np.stack([model[k][0] for k in keys]).astype(np.float64)
    for _ in range(3):
        q = rng.standard_normal(DIM).astype(np.float32)
        d = np.sqrt(((X - q.astype(np.float64)) ** 2).sum(1))
        order = np.lexsort((keys, d))[:5]
        res = da.find(vector=q, limit=5, exact=True)
        if ties:
            hit = np.array([d[keys.index(i)] for i in res.ids])
            assert np.allclose(res.scores, -hit, rtol=1e-4, atol=1e-4)
        else:
            assert res.ids == [keys[i] for i in order]
        assert np.allclose(res.scores, -d[order], rtol=1e-4, atol=1e-4)


ops = st.lists(st.one_of(
    st.tuples(st.just("extend"), st.integers(0, 3000), st.integers(1, 1500)),  # (first id, count): growths
    st.tuples(st.just("delete"), st.integers(0, 4500), st.integers(1, 700)),
    st.tuples(st.just("update"), st.integers(0, 4500), st.integers(1, 50)),
    st.tuples(st.just("reopen"), st.just(0), st.just(0))), min_size=1, max_size=8)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, seed=st.integers(0, 2**31))
def test_random_writes_growths_and_reopens_keep_every_vector(tmp_path_factory, ops, seed):
    path = tmp_path_factory.mktemp("disk") / "col"
    rng = np.random.default_rng(seed)
    model: dict = {}
    da = open_disk(path)
    try:
        for k, (op, first, count) in enumerate(ops, start=1):
            keys = [f"d{i}" for i in range(first, first + count)]
            if op == "extend":
                da.extend_columns({"id": keys, "v": np.stack([vector(key, k) for key in keys]), "n": [k] * count})
                model.update({key: (vector(key, k), k) for key in keys})
            elif op == "delete":
                assert da.delete(keys) == sum(key in model for key in keys)
                for key in keys:
                    model.pop(key, None)
            elif op == "update":
                for key in keys:
                    if key in model:
                        da.update(key, v=vector(key, k))
                        model[key] = (vector(key, k), model[key][1])
            else:
                da.close()
                da = open_disk(path)
            check(da, model, rng)
        da.close()
        with open_disk(path) as again:
            check(again, model, rng)
            assert again.stats()["vectors_on_disk"] is True
    finally:
        da.close()


@pytest.mark.parametrize("snapshot", [True, False])
def test_a_growth_after_reopen_keeps_the_rows_read_from_the_files(tmp_path, snapshot):
    """After an open the rows are the snapshot's (or the replayed log's); the first growth moves
    them into the block's file, then writes go on in it."""
    path, model = tmp_path / "col", {}
    da = open_disk(path)
    for k in (1, 2, 3):
        keys = [f"d{i}" for i in range(k * 1000, k * 1000 + 900)]
        da.extend_columns({"id": keys, "v": np.stack([vector(key, k) for key in keys]), "n": [k] * len(keys)})
        model.update({key: (vector(key, k), k) for key in keys})
        if snapshot:
            da.close()
        # without close(): the next opener replays the log (a dropped writer frees its lock)
        da = None
        gc.collect()
        da = open_disk(path)
        check(da, model, np.random.default_rng(k))
    da.close()


def test_a_full_disk_is_a_backend_error_and_loses_nothing(tmp_path, monkeypatch):
    """The block's room is reserved before a row is written into it: a disk that cannot hold the
    growth refuses the write with hs.BackendError (never SIGBUS from a write into a mapped hole)."""
    import errno
    import os
    path = tmp_path / "col"
    keys = [f"d{i}" for i in range(100)]
    with open_disk(path) as da:
        da.extend_columns({"id": keys, "v": np.stack([vector(k, 1) for k in keys]), "n": [1] * 100})
        real = os.posix_fallocate

        def full(fd, offset, length):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "posix_fallocate", full)
        more = [f"d{i}" for i in range(100, 5000)]  # past the block's capacity: a growth
        with pytest.raises(hs.BackendError, match="No space left"):
            da.extend_columns({"id": more, "v": np.stack([vector(k, 2) for k in more]), "n": [2] * len(more)})
        monkeypatch.setattr(os, "posix_fallocate", real)
        model = {k: (vector(k, 1), 1) for k in keys}
        check(da, model, np.random.default_rng(0))
    with open_disk(path) as again:
        check(again, model, np.random.default_rng(1))


def test_the_block_is_counted_on_disk_not_in_ram(tmp_path):
    n = 5000
    X = np.random.default_rng(1).standard_normal((n, DIM)).astype(np.float32)
    with open_disk(tmp_path / "a") as da, hs.DocumentArray(Vec, storage="hnsw", path=tmp_path / "b", metric="l2") as ram:
        for d in (da, ram):
            d.extend_columns({"id": [f"d{i}" for i in range(n)], "v": X})
        disk_stats, ram_stats = da.stats(), ram.stats()
        assert disk_stats["vector_bytes"] == ram_stats["vector_bytes"] >= n * DIM * 4
        # RAM keeps one float per row beside an on-disk block (its norm), not the rows
        assert disk_stats["bytes"]["vectors"] <= ram_stats["bytes"]["vectors"] // DIM + 4096
        q = X[17] + 0.001
        assert da.find(vector=q, limit=10).ids == ram.find(vector=q, limit=10).ids


@pytest.mark.parametrize("options,why", [
    (dict(), "needs path="),
    (dict(path="P", quantization=None), "quantized walk"),
])
def test_options_it_cannot_honour_are_config_errors(tmp_path, options, why):
    if options.get("path") == "P":
        options["path"] = tmp_path / "c"
    with pytest.raises(hs.ConfigError, match=why):
        hs.DocumentArray(Vec, storage="hnsw", vectors_on_disk=True, **options)
    assert not (tmp_path / "c").exists()


def test_a_follower_with_vectors_on_disk_sees_the_writers_vectors(tmp_path):
    path = tmp_path / "col"
    with open_disk(path) as w, open_disk(path, read_only=True) as ro:
        model = {}
        for k in range(1, 4):  # each write grows the block past what the follower mapped
            keys = [f"d{i}" for i in range(k * 700)]
            w.extend_columns({"id": keys, "v": np.stack([vector(key, k) for key in keys]), "n": [k] * len(keys)})
            model.update({key: (vector(key, k), k) for key in keys})
            check(ro, model, np.random.default_rng(k), ties=k >= 7)


# ------------------------------------------------- a reader in another process
def step(da, k: int, model: dict) -> None:
    """Call k of the stepped writer, applied to `da` (None: to the model alone): growths, rewrites
    of existing ids, vectors updated in place (also right after a reopen), deletes, a snapshot."""
    def extend(keys):
        if da is not None:
            da.extend_columns({"id": keys, "v": np.stack([vector(key, k) for key in keys]), "n": [k] * len(keys)})
        model.update({key: (vector(key, k), k) for key in keys})

    if k in (1, 2, 6, 8):  # new ids (growths) and rewrites of existing ones
        # 6: the first growth after the reopen, which leaves the last slot's row (d1999) as it was
        extend([f"d{i}" for i in {1: range(700), 2: range(2000), 6: [*range(200, 1500), *range(2000, 3000)],
                                  8: range(0, 3000, 2)}[k]])
    elif k == 3:  # one by one, in place
        for key in [f"d{i}" for i in range(0, 50)]:
            if da is not None:
                da.update(key, v=vector(key, k))
            model[key] = (vector(key, k), model[key][1])
    elif k == 4:
        if da is not None:
            assert da.delete([f"d{i}" for i in range(100, 400)]) == 300
        for i in range(100, 400):
            del model[f"d{i}"]
    elif k == 5:  # close: a snapshot, a new generation for the reader; the block is mapped from it
        if da is not None:
            da.close()
    elif k == 7:  # in place right after the reopen: every row of call 6's documents
        if da is not None:
            assert da.update_many({"n": 6}, v=vector("d0", k)) == 2300
        model.update({key: (vector("d0", k), n) for key, (_, n) in model.items() if n == 6})


STEPS = 8


def run_stepper(path: str, disk: str) -> None:
    """The writer of test_a_reader_process_reads_the_writers_vectors: call k when told (a line on
    stdin), then "ack k"; opened again after call 5 (its close)."""
    def opened():
        return hs.DocumentArray(Vec, storage="hnsw", path=path, vectors_on_disk=disk == "1", metric="l2")
    da, model = opened(), {}
    print("ready", flush=True)
    for k in range(1, STEPS + 1):
        sys.stdin.readline()
        step(da, k, model)
        if k == 5:
            da = opened()
        print(f"ack {k}", flush=True)
    da.close()


_STEPPER = "import sys\nfrom tests.contract.test_vectors_on_disk import run_stepper\nrun_stepper(*sys.argv[1:])\n"


@pytest.mark.parametrize("writer_disk,reader_disk", [(True, True), (True, False), (False, True)])
def test_a_reader_process_reads_the_writers_vectors(tmp_path, writer_disk, reader_disk):
    """A read_only=True opener in another process than the writer, with vectors_on_disk or
    without (whatever the writer's): after each acknowledged call it holds the writer's documents
    and vectors bit for bit (the model's), through growths, rewrites in place, deletes and a new
    generation; so does a reader opened at the end, and a reader with follow=False opened midway
    keeps the state of its open."""
    path = tmp_path / "col"
    proc = subprocess.Popen([sys.executable, "-c", _STEPPER, str(path), "1" if writer_disk else "0"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        assert proc.stdout.readline().strip() == b"ready", proc.communicate()[1][-3000:]
        options = dict(read_only=True, vectors_on_disk=reader_disk, metric="l2")
        ro, fixed, model, at_fixed = hs.DocumentArray(Vec, storage="hnsw", path=path, **options), None, {}, {}
        for k in range(1, STEPS + 1):
            proc.stdin.write(b"go\n")
            line = proc.stdout.readline().strip()
            assert line == f"ack {k}".encode(), (line, proc.communicate()[1][-3000:])
            step(None, k, model)
            check(ro, model, np.random.default_rng(k), ties=k >= 7)
            if k == 2:
                fixed, at_fixed = hs.DocumentArray(Vec, storage="hnsw", path=path, follow=False, **options), dict(model)
        check(fixed, at_fixed, np.random.default_rng(0))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()[-3000:]
        ro.close()
        fixed.close()
        with hs.DocumentArray(Vec, storage="hnsw", path=path, **options) as late:
            check(late, model, np.random.default_rng(99), ties=True)
    finally:
        proc.kill()
        proc.wait(timeout=60)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()


# ------------------------------------------------------------------ kill -9
def run_child(path: str) -> None:
    """The writer: call k writes 400 documents (new and rewritten) with vector(key, k)."""
    da = open_disk(path)
    print("ready", flush=True)
    for k in range(1, 100_000):
        keys = [f"d{(k * 311 + j) % 3000}" for j in range(400)]
        da.extend_columns({"id": keys, "v": np.stack([vector(key, k) for key in keys]), "n": [k] * len(keys)})
        print(f"ack {k}", flush=True)


def model_after(n: int) -> dict:
    m: dict = {}
    for k in range(1, n + 1):
        m.update({key: (vector(key, k), k) for key in (f"d{(k * 311 + j) % 3000}" for j in range(400))})
    return m


_CHILD = "import sys\nfrom tests.contract.test_vectors_on_disk import run_child\nrun_child(sys.argv[1])\n"


@pytest.mark.parametrize("delay", [0.3, 1.0])
def test_kill_9_keeps_every_acknowledged_vector(tmp_path, delay):
    path = tmp_path / "col"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    assert proc.stdout.readline().strip() == b"ready", proc.communicate()[1][-3000:]
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    acked = [int(line.split()[1]) for line in out.splitlines() if line.startswith(b"ack ")]
    n = acked[-1] if acked else 0
    assert acked == list(range(1, n + 1)), err[-3000:]
    with open_disk(path) as again:
        got_n = {d.id: d.n for d in again}
        expect = model_after(n) if got_n == {k: v[1] for k, v in model_after(n).items()} else model_after(n + 1)
        check(again, expect, np.random.default_rng(n))


def _anon() -> int:
    """This process's anonymous memory, after the C heap gave back what it keeps of freed
    blocks (glibc holds a freed batch's copies until a trim: noise beside the block measured)."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon"))


def _vector_files() -> list:
    """The files without a name (deleted or O_TMPFILE: the on-disk vector blocks) this process has open."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith("(deleted)"):
            out.append(target)
    return out


class Wide(hs.Document):
    v: hs.Vector[512]
    n: int = 0


def test_rewrites_after_a_reopen_go_to_the_file_not_to_ram(tmp_path):
    """After an open the block is the snapshot's copy-on-write mapping: rewriting every vector in
    place (no growth) must not leave the block's pages in the process's own memory.

    The rewrites are update_many calls: an extend after an open always grows the block first (the
    writer reserves room for the batch before logging it, and an opened block has no spare row),
    and a growth moves the rows into the file anyway, so extends would pass with the move of
    DenseColumn._into_file disabled; update_many writes the existing slots where they are (fails
    then: ~54 MB of anonymous memory for the 41 MB block, ~13 MB with the move: the graph's codes
    and links, rewritten in its own copy-on-write pages). The follower's case is the next test."""
    n = 20_000  # 40 MB of float32
    rng = np.random.default_rng(3)
    ids = [f"d{i}" for i in range(n)]
    with hs.DocumentArray(Wide, storage="hnsw", path=tmp_path / "w", vectors_on_disk=True, metric="l2") as da:
        da.extend_columns({"id": ids, "v": rng.standard_normal((n, 512), dtype=np.float32), "n": np.arange(n) // 5000})
    with hs.DocumentArray(Wide, storage="hnsw", path=tmp_path / "w", vectors_on_disk=True, metric="l2") as da:
        new = rng.standard_normal((4, 512), dtype=np.float32)
        before = _anon()
        for c in range(4):  # a quarter of the slots each, written in place
            assert da.update_many({"n": c}, v=new[c]) == 5000
        grown = _anon() - before
        # the block is 41 MB; the graph's rewritten codes and links add ~13 MB either way
        assert grown < n * 512 * 4 * 3 // 4, f"{grown:,} bytes of anonymous memory for a {n * 512 * 4:,}-byte block"
        for i in (0, 7777, n - 1):
            assert np.array_equal(np.asarray(da[ids[i]].v, dtype=np.float32), new[i // 5000])


def run_rewriter(path: str) -> None:
    """The writer of the follower's test: rewrites every document's vector (extends of existing
    ids, 4 x 5,000) when told, says "ack", and closes only when told again (a close would write a
    snapshot: the follower would open it rather than apply the rewrites)."""
    rng = np.random.default_rng(4)
    with hs.DocumentArray(Wide, storage="hnsw", path=path, vectors_on_disk=True, metric="l2") as da:
        print("ready", flush=True)
        sys.stdin.readline()
        for lo in range(0, 20_000, 5000):
            da.extend_columns({"id": [f"d{i}" for i in range(lo, lo + 5000)],
                               "v": rng.standard_normal((5000, 512), dtype=np.float32)})
        print("ack", flush=True)
        sys.stdin.readline()


_REWRITER = "import sys\nfrom tests.contract.test_vectors_on_disk import run_rewriter\nrun_rewriter(sys.argv[1])\n"


def test_a_followers_rewrites_in_place_go_to_the_file_not_to_ram(tmp_path):
    """A follower applies the writer's extends of existing ids where their rows are, in the block
    it mapped from the snapshot (the writer, reserving room first, moved its own by a growth): the
    rows must move into the follower's file, not into its anonymous memory. The writer is another
    process, so that this process's memory is the follower's."""
    n = 20_000
    path = tmp_path / "w"
    ids = [f"d{i}" for i in range(n)]
    with hs.DocumentArray(Wide, storage="hnsw", path=path, vectors_on_disk=True, metric="l2") as da:
        da.extend_columns({"id": ids, "v": np.random.default_rng(3).standard_normal((n, 512), dtype=np.float32)})
    proc = subprocess.Popen([sys.executable, "-c", _REWRITER, str(path)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    try:
        assert proc.stdout.readline().strip() == b"ready", proc.communicate()[1][-3000:]
        with hs.DocumentArray(Wide, storage="hnsw", path=path, vectors_on_disk=True, metric="l2",
                              read_only=True) as ro:
            assert len(ro) == n
            before = _anon()
            proc.stdin.write(b"go\n")
            assert proc.stdout.readline().strip() == b"ack", proc.communicate()[1][-3000:]
            assert ro.refresh() == 4  # the four rewrites, applied in place (no new generation)
            grown = _anon() - before
            # moved: ~17 MB (the graph's rewritten codes and links, the log's batches read);
            # left in the snapshot's mapping: ~57 MB (the 41 MB block on top)
            assert grown < n * 512 * 4 * 3 // 4, f"{grown:,} bytes of anonymous memory for a {n * 512 * 4:,}-byte block"
            new = np.random.default_rng(4).standard_normal((n, 512), dtype=np.float32)
            for i in (0, 7777, n - 1):
                assert np.array_equal(np.asarray(ro[ids[i]].v, dtype=np.float32), new[i])
        proc.stdin.write(b"bye\n")
        assert proc.wait(timeout=120) == 0, proc.stderr.read()[-3000:]
    finally:
        proc.kill()
        proc.wait(timeout=60)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            pipe.close()


def test_after_a_schema_change_the_block_stays_in_the_collections_directory(tmp_path):
    path = tmp_path / "col"
    keys = [f"d{i}" for i in range(50)]
    with open_disk(path) as da:
        da.extend_columns({"id": keys, "v": np.stack([vector(k, 1) for k in keys]), "n": [1] * 50})

    class Tagged(hs.Document):
        v: hs.Vector[DIM]
        n: int = 0
        tag: hs.Keyword = "t"
    more = [f"d{i}" for i in range(50, 4000)]  # a growth after the evolution
    with hs.DocumentArray(Tagged, storage="hnsw", path=path, vectors_on_disk=True, metric="l2") as da:
        da.extend_columns({"id": more, "v": np.stack([vector(k, 2) for k in more]), "n": [2] * len(more)})
        files = _vector_files()
        # an O_TMPFILE file shows as "<its directory>/#<inode> (deleted)"
        assert any(f.startswith(os.fspath(path) + "/#") for f in files), files
        assert np.array_equal(np.asarray(da["d3"].v, dtype=np.float32), vector("d3", 1))


def test_a_follower_that_cannot_create_files_in_the_directory_puts_its_block_in_the_temp_dir(
        tmp_path, monkeypatch, caplog):
    """A reader without write access to the collection's directory (simulated: this suite runs
    as root too) keeps its block in the system's temp directory, says so, and reads the writer's
    vectors as before."""
    import errno
    import logging
    import tempfile
    path, model = tmp_path / "col", {}
    keys = [f"d{i}" for i in range(700)]
    with open_disk(path) as w:
        w.extend_columns({"id": keys, "v": np.stack([vector(k, 1) for k in keys]), "n": [1] * 700})
        model.update({k: (vector(k, 1), 1) for k in keys})
        real = tempfile.TemporaryFile

        def refusing(*args, **kwargs):
            if kwargs.get("dir") is not None:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            return real(*args, **kwargs)
        monkeypatch.setattr(tempfile, "TemporaryFile", refusing)
        before = set(_vector_files())
        with caplog.at_level(logging.WARNING, logger="hybridsearch"), open_disk(path, read_only=True) as ro:
            more = [f"d{i}" for i in range(300, 3000)]  # rewrites and a growth, for both
            w.extend_columns({"id": more, "v": np.stack([vector(k, 2) for k in more]), "n": [2] * len(more)})
            model.update({k: (vector(k, 2), 2) for k in more})
            check(ro, model, np.random.default_rng(5))
            assert "goes to " + tempfile.gettempdir() in caplog.text, caplog.text
            moved = set(_vector_files()) - before
            assert moved and all(f.startswith(tempfile.gettempdir()) for f in moved), (moved, before)
        check(w, model, np.random.default_rng(6))


def test_a_collection_saved_with_a_float_walk_is_refused_with_vectors_on_disk(tmp_path):
    with hs.DocumentArray(Vec, storage="hnsw", path=tmp_path / "f", quantization=None, metric="l2") as da:
        da.extend_columns({"id": ["a"], "v": np.ones((1, DIM), dtype=np.float32)})
    with pytest.raises(hs.ConfigError, match="quantization=None"):
        open_disk(tmp_path / "f")  # quantization="auto" would take the float walk the files hold


def _mapped_block_bytes(directory: Path) -> int:
    """Resident bytes of this process's mappings of on-disk vector blocks in `directory` (their
    unlinked scratch files, shown as "#<inode> (deleted)" or by that name in /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                inside = len(parts) > 5 and parts[5].startswith(str(directory))
            elif inside and parts[0] == "Rss:":
                total += int(parts[1]) * 1024
    return total


def test_after_writes_that_grow_the_block_none_of_its_pages_stay_mapped(tmp_path):
    """Each growth maps the file again, and a view of the earlier block can keep the earlier
    mapping open (a snapshot taken when the log passes 64 MiB does): a write must drop the pages
    of every mapping, not only the last one's (the pages written before a growth stayed mapped
    and RSS counted the same file pages twice)."""
    X = np.random.default_rng(4).standard_normal((40000, 512)).astype(np.float32)  # 82 MB: snapshots
    with hs.DocumentArray(Wide, storage="hnsw", path=tmp_path / "c", metric="l2", vectors_on_disk=True,
                          m=4, ef_construct=8) as da:
        for lo in range(0, len(X), 8000):  # five writes: the block grows more than once
            da.extend_columns({"id": [f"d{i}" for i in range(lo, lo + 8000)], "v": X[lo:lo + 8000]})
            assert _mapped_block_bytes(tmp_path / "c") <= 64 * 1024
        np.testing.assert_array_equal(da["d9001"].v, X[9001])
        np.testing.assert_array_equal(da["d39001"].v, X[39001])
