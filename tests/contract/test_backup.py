"""DocumentArray.backup and hs.restore (API.md, "Backup and restore"), through the public API.

A writer thread makes a deterministic sequence of calls and records each once it has returned
(acknowledged); backups taken meanwhile must open as the plain-dict model after the first k
calls, for a k no smaller than the calls acknowledged before backup() was called (and at most
one more than those acknowledged when it returned: the call in flight). A child process that
backs up in a loop is killed (SIGKILL) at a random moment: each destination then either does not
exist or opens complete, and what a half-made copy leaves is refused or complete too.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import DISK_OPTIONS, STORAGES
from tests.models import exact_scores, matches

ROOT = Path(__file__).resolve().parents[2]
# memory and hnsw with files, and without (a RAM collection backs up as one snapshot), sqlite;
# hnsw-disk, hnsw-rq: hnsw with files and vectors_on_disk=True (source and copies opened with it)
BACKED = [s for s in ("memory", "memory-path", "hnsw", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite") if s in STORAGES]
WITH_FILES = [s for s in ("memory-path", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite") if s in STORAGES]
CATEGORIES = ["a", "b", "c"]
DIM = 8


class Doc(hs.Document):
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    embedding: Optional[hs.Vector[DIM]] = None


class Other(hs.Document):
    title: hs.Text = ""


def doc(key: str, k: int) -> dict:
    rng = np.random.default_rng(zlib.crc32(f"{key} {k}".encode()))
    return dict(id=key, title=f"word{k % 5} item {key}", category=CATEGORIES[zlib.crc32(key.encode()) % 3],
                price=k, embedding=rng.standard_normal(DIM).astype(np.float32))


def initial_docs(n: int = 200) -> list:
    return [doc(f"d{i}", 0) for i in range(n)]


def call(k: int) -> tuple:
    """The writer's k-th call (k >= 1); each one changes the collection."""
    if k % 3 == 1:
        return ("extend", [doc(f"w{k}_{j}", k) for j in range(10)])
    if k % 3 == 2:
        return ("update_many", {"category": CATEGORIES[k % 3]}, {"price": 1000 + k})
    return ("delete", [f"w{k - 2}_{j}" for j in range(5)])  # added by call k - 2


def apply(da, c: tuple) -> None:
    if c[0] == "extend":
        da.extend(c[1])
    elif c[0] == "update_many":
        da.update_many(c[1], **c[2])
    else:
        da.delete(c[1])


def model_states(initial: list, n: int) -> list:
    """The model {id: row} after 0, 1, ..., n calls."""
    m = {d["id"]: dict(d) for d in initial}
    out = [{i: _row(d) for i, d in m.items()}]
    for k in range(1, n + 1):
        c = call(k)
        if c[0] == "extend":
            m.update({d["id"]: dict(d) for d in c[1]})
        elif c[0] == "update_many":
            for d in m.values():
                if matches(d, c[1]):
                    d.update(c[2])
        else:
            for i in c[1]:
                m.pop(i, None)
        out.append({i: _row(d) for i, d in m.items()})
    return out


def _row(d: dict) -> tuple:
    return d["title"], d["category"], d["price"], np.asarray(d["embedding"], dtype=np.float32).tobytes()


def state(da) -> dict:
    return {d.id: _row(d.model_dump()) for d in da}


def kind(storage: str) -> str:
    return {"memory-path": "memory", "hnsw-path": "hnsw", "hnsw-disk": "hnsw", "hnsw-rq": "hnsw"}.get(storage, storage)


def disk(storage: str) -> dict:
    """The storage's further options: hnsw-disk and hnsw-rq keep their vectors on disk."""
    return dict(DISK_OPTIONS.get(storage, {}))


def open_source(storage: str, where: Path, **options):
    if storage in ("memory-path", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite"):
        options["path"] = where / ("src.db" if storage == "sqlite" else "src")
    return hs.DocumentArray(Doc, storage=kind(storage), **disk(storage), **options)


def dest_of(storage: str, where: Path, name: str) -> Path:
    return where / (f"{name}.db" if storage == "sqlite" else name)


def open_copy(storage: str, path, **options):
    """A backup opens as a collection of the same storage kind, with path=."""
    return hs.DocumentArray(Doc, storage=kind(storage), path=path, **disk(storage), **options)


# ------------------------------------------------------------- concurrent writes
@pytest.mark.parametrize("storage", BACKED)
def test_a_backup_during_writes_opens_as_the_state_after_a_prefix_of_the_acknowledged_writes(storage, tmp_path):
    initial = initial_docs()
    da = open_source(storage, tmp_path)
    da.extend(initial)
    acked: list = []
    stop = threading.Event()
    failure: list = []

    def writer():
        try:
            k = 0
            while not stop.is_set():
                k += 1
                apply(da, call(k))
                acked.append(k)
        except BaseException as e:  # pragma: no cover - reported below
            failure.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    windows = []
    try:
        for b in range(3):
            deadline = time.monotonic() + 30
            while len(acked) < 5 * (b + 1) and time.monotonic() < deadline and not failure:
                time.sleep(0.005)
            before = len(acked)
            report = da.backup(dest_of(storage, tmp_path, f"b{b}"))
            windows.append((before, len(acked), report))
    finally:
        stop.set()
        thread.join(60)
    assert not failure, failure
    states = model_states(initial, len(acked))
    for b, (before, after, report) in enumerate(windows):
        assert set(report) >= {"documents", "bytes", "seconds", "stall_seconds"}
        assert 0 <= report["stall_seconds"] <= report["seconds"]
        with open_copy(storage, dest_of(storage, tmp_path, f"b{b}")) as copy:
            got = state(copy)
        ks = [k for k, s in enumerate(states) if s == got]
        assert ks, f"backup {b} is no state of the acknowledged writes ({before}..{after} acknowledged around it)"
        # the call in flight when backup() returned may be in it: at most one past `after`
        assert any(before <= k <= after + 1 for k in ks), (b, before, after, ks)
        assert report["documents"] == len(got)
    # the source goes on, untouched by the backups
    assert state(da) == states[len(acked)]
    da.close()


@pytest.mark.parametrize("storage", [s for s in ("memory-path", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite") if s in STORAGES])
def test_a_read_only_opener_backs_up_what_it_reads(storage, tmp_path):
    initial = initial_docs(50)
    writer = open_source(storage, tmp_path)
    writer.extend(initial)
    for k in range(1, 4):
        apply(writer, call(k))
    follower = open_source(storage, tmp_path, read_only=True)  # follow=True: it reads the writer's latest
    fixed = open_source(storage, tmp_path, read_only=True, follow=False)  # it reads the state of its open
    seen = state(fixed)
    for k in range(4, 7):  # the writer goes on
        apply(writer, call(k))
    states = model_states(initial, 6)
    assert seen == states[3]
    for name, reader, want in (("follows", follower, states[6]), ("fixed", fixed, states[3])):
        dest = dest_of(storage, tmp_path, name)
        reader.backup(dest)
        with open_copy(storage, dest) as copy:
            got = state(copy)
        if storage == "sqlite" and name == "fixed":  # its mirror is its open's; the file copied is the latest commit
            assert got in (states[3], states[6])
        else:
            assert got == want == state(reader)
    follower.close()
    fixed.close()
    writer.close()


# ------------------------------------------------------------------ kill -9
def run_backup_child(storage: str, where: str) -> None:
    """Writes three calls over the initial documents, says "ready", then backs up in a loop."""
    where = Path(where)
    da = open_source(storage, where)
    for k in range(1, 4):
        apply(da, call(k))
    print("ready", flush=True)
    for i in range(1_000_000):
        da.backup(dest_of(storage, where, f"k{i}"))
        print(f"done {i}", flush=True)


_CHILD = "import sys\nfrom tests.contract.test_backup import run_backup_child\nrun_backup_child(*sys.argv[1:])\n"


TRIALS = 2  # kills at random moments: each run tries other ones (a kill lands in the copy about half the time)


@pytest.mark.parametrize("storage", WITH_FILES)
def test_kill_9_during_backups_leaves_each_destination_absent_or_complete(storage, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for trial in range(TRIALS if storage != "sqlite" else 1):
        where = tmp_path / f"t{trial}"
        where.mkdir()
        kill_during_backups(storage, where, rng, f"seed {seed}, trial {trial}")


def kill_during_backups(storage: str, tmp_path: Path, rng: random.Random, seed: str) -> None:
    initial = initial_docs(3000)
    with open_source(storage, tmp_path) as da:
        da.extend(initial)
    expected = model_states(initial, 3)[3]
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, storage, str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    for line in iter(proc.stdout.readline, b""):
        if line.strip() == b"ready":
            break
    else:
        raise AssertionError(f"the child did not start: {proc.communicate()[1][-3000:]}")
    time.sleep(rng.uniform(0.05, 0.6))
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err[-3000:].decode()
    done = [int(line.split()[1]) for line in out.splitlines() if line.startswith(b"done ")]
    n = len(done)
    assert done == list(range(n))
    for i in range(n + 1):  # every finished backup, and the one the kill interrupted
        dest = dest_of(storage, tmp_path, f"k{i}")
        if i == n and not dest.exists():
            continue
        with open_copy(storage, dest, read_only=True) as copy:
            assert state(copy) == expected, f"{seed}: backup k{i} of {n} finished"
    assert not dest_of(storage, tmp_path, f"k{n + 1}").exists()
    temps = [p for p in tmp_path.iterdir() if ".hsbackup-" in p.name]
    assert len({p.name.split(".tmp")[0] for p in temps}) <= 1, temps  # (sqlite: with its -journal beside it)
    if storage != "sqlite":
        for temp in temps:  # a half copy is refused; a finished one that was not renamed yet opens whole
            try:
                copy = open_copy(storage, temp, read_only=True)
            except hs.BackendError:
                continue
            with copy:
                assert state(copy) == expected, f"{seed}: the leftover {temp.name} opened with other data"
    # a later backup into the same folder removes what the dead one left
    with open_copy(storage, tmp_path / ("src.db" if storage == "sqlite" else "src")) as source:
        again = dest_of(storage, tmp_path, f"k{n + 1}")
        source.backup(again)
        folder = [p.name for p in tmp_path.iterdir()]
    assert not [p for p in folder if ".hsbackup-" in p], folder
    with open_copy(storage, again) as copy:
        assert state(copy) == expected


# ------------------------------------------------------------ destinations
@pytest.mark.parametrize("storage", BACKED)
def test_a_destination_that_exists_is_refused_and_nothing_is_touched(storage, tmp_path):
    initial = initial_docs(30)
    da = open_source(storage, tmp_path)
    da.extend(initial)
    before = state(da)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "keep.txt").write_bytes(b"mine")
    a_file = tmp_path / "a_file"
    a_file.write_bytes(b"data")
    other = dest_of(storage, tmp_path, "other")
    da.backup(other)  # a backup: the next one must not overwrite it
    other_bytes = {p.name: p.read_bytes() for p in ([other] if other.is_file() else other.iterdir())}
    for dest in (occupied, a_file, other, tmp_path / ("src.db" if storage == "sqlite" else "src")):
        if not dest.exists():
            continue
        with pytest.raises(hs.ConfigError):
            da.backup(dest)
    assert (occupied / "keep.txt").read_bytes() == b"mine" and os.listdir(occupied) == ["keep.txt"]
    assert a_file.read_bytes() == b"data"
    assert {p.name: p.read_bytes() for p in ([other] if other.is_file() else other.iterdir())} == other_bytes
    assert state(da) == before
    with pytest.raises(hs.ConfigError):
        da.backup(12)
    with pytest.raises(hs.ConfigError, match="NUL"):  # was a raw ValueError from os.makedirs
        da.backup(str(tmp_path / "a\x00b"))
    with pytest.raises(hs.ConfigError, match="NUL"):
        hs.restore(str(other), str(tmp_path / "r\x00s"))
    empty = tmp_path / "empty"
    empty.mkdir()
    if storage != "sqlite":  # an empty folder is a destination too
        da.backup(empty)
        with open_copy(storage, empty) as copy:
            assert state(copy) == before
    else:  # not for a copy that is one file
        with pytest.raises(hs.ConfigError):
            da.backup(empty)
        assert os.listdir(empty) == []
    da.close()
    with pytest.raises(hs.ClosedError):
        da.backup(tmp_path / "after-close")
    assert not (tmp_path / "after-close").exists()


# ------------------------------------------------------------------ restore
@pytest.mark.parametrize("storage", WITH_FILES)
def test_restore_round_trip_and_a_damaged_or_foreign_backup_is_refused(storage, tmp_path):
    initial = initial_docs(100)
    with open_source(storage, tmp_path) as da:
        da.extend(initial)
        for k in range(1, 5):
            apply(da, call(k))
        backup = dest_of(storage, tmp_path, "bk")
        da.backup(backup)
        expected = state(da)
    restored = dest_of(storage, tmp_path, "restored")
    report = hs.restore(backup, restored, schema=Doc)
    assert report["bytes"] > 0
    with open_copy(storage, restored) as copy:
        assert state(copy) == expected
    with open_copy(storage, backup) as copy:  # the backup itself opens too
        assert state(copy) == expected
    plain = dest_of(storage, tmp_path, "plain")
    hs.restore(str(backup), str(plain))  # without a schema: the checksums only
    with open_copy(storage, plain) as copy:
        assert state(copy) == expected
    with pytest.raises(hs.ConfigError):  # never over something
        hs.restore(backup, restored)
    with pytest.raises(hs.BackendError):  # another schema's backup
        hs.restore(backup, tmp_path / "foreign", schema=Other)
    assert not (tmp_path / "foreign").exists()
    with pytest.raises(hs.BackendError):
        hs.restore(tmp_path / "nothing-here", tmp_path / "x")
    # one flipped byte in the middle of the data
    damaged = dest_of(storage, tmp_path, "damaged")
    shutil.copytree(backup, damaged) if backup.is_dir() else shutil.copy(backup, damaged)
    victim = (damaged if damaged.is_file()
              else max((p for p in damaged.iterdir() if p.suffix in (".hss", ".hsl")), key=lambda p: p.stat().st_size))
    data = bytearray(victim.read_bytes())
    if storage == "sqlite":  # its header: SQLite itself keeps no checksum of the pages
        data[:16] = b"not a database!\0"
    else:
        data[len(data) // 2] ^= 0x40
    victim.write_bytes(bytes(data))
    with pytest.raises(hs.BackendError):
        hs.restore(damaged, tmp_path / ("from-damaged.db" if storage == "sqlite" else "from-damaged"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("from-damaged") or ".hsbackup-" in p.name]


def test_restore_refuses_a_half_made_copy(tmp_path):
    with hs.DocumentArray(Doc, storage="memory", path=tmp_path / "src") as da:
        da.extend(initial_docs(50))
        da.backup(tmp_path / "bk")
    half = tmp_path / "half"
    shutil.copytree(tmp_path / "bk", half)
    (half / "MANIFEST").unlink()  # what a copy killed before its last step holds
    with pytest.raises(hs.BackendError):
        hs.restore(half, tmp_path / "x")
    with pytest.raises(hs.BackendError):
        hs.DocumentArray(Doc, storage="memory", path=half)
    cut = tmp_path / "cut"
    shutil.copytree(tmp_path / "bk", cut)
    log = next(p for p in cut.iterdir() if p.suffix == ".hsl")
    with open(log, "ab") as f:
        f.write(b"\x93hsR\x01\x00")  # a torn record at the end: an open forgives it, a restore does not
    with pytest.raises(hs.BackendError):
        hs.restore(cut, tmp_path / "y")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


# ------------------------------------------------------------------- hnsw
@pytest.mark.parametrize("storage", [s for s in ("hnsw", "hnsw-path", "hnsw-disk", "hnsw-rq") if s in STORAGES])
def test_the_hnsw_graph_of_a_backup_answers_like_brute_force(storage, tmp_path):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((2000, DIM)).astype(np.float32)
    ids = [f"v{i}" for i in range(len(X))]
    with open_source(storage, tmp_path) as da:
        da.extend_columns({"id": ids, "title": [f"t{i}" for i in range(len(X))], "category": ["a"] * len(X),
                           "price": list(range(len(X))), "embedding": X})
        da.delete([f"v{i}" for i in range(0, 2000, 10)])  # logged after the snapshot, with path=
        da.backup(tmp_path / "bk")
    keep = np.array([i % 10 != 0 for i in range(len(X))])
    live, Xl = [i for i, k in zip(ids, keep) if k], X[keep]
    recall = []
    with hs.DocumentArray(Doc, storage="hnsw", path=tmp_path / "bk") as copy:
        assert len(copy) == len(live)
        for q in rng.standard_normal((20, DIM)).astype(np.float32):
            s = exact_scores(Xl, q, "cosine")
            truth = [live[i] for i in np.argsort(-s, kind="stable")[:10]]
            exact = copy.find(q, limit=10, exact=True)
            assert list(exact.ids) == truth
            approx = copy.find(q, limit=10)
            recall.append(len(set(approx.ids) & set(truth)) / 10)
    assert np.mean(recall) >= 0.9, recall


def test_a_storage_without_backup_says_so(tmp_path):
    if "hnswlib" not in STORAGES:
        pytest.skip("hnswlib is not in this run's storages")
    with hs.DocumentArray(Doc, storage="hnswlib") as da:
        da.extend(initial_docs(5))
        with pytest.raises(hs.UnsupportedError):
            da.backup(tmp_path / "bk")
    assert not (tmp_path / "bk").exists()


# ------------------------------------------------------- embedding functions
class Letters(hs.EmbeddingFunction):
    """A toy model: letter counts."""
    name, model, dimension, batch_size = "letters", "a-z", 26, 64

    def embed_documents(self, texts):
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for c in t.lower():
                if "a" <= c <= "z":
                    out[i, ord(c) - 97] += 1
        return out


class Letters2(Letters):
    model = "a-z, v2"


class Word(hs.Document):
    word: hs.Text
    emb: hs.Vector[26] = hs.embedded("word", fn=Letters())


class Word2(hs.Document):
    word: hs.Text
    emb: hs.Vector[26] = hs.embedded("word", fn=Letters2())


@pytest.mark.parametrize("storage", WITH_FILES)
def test_a_backup_and_its_restore_keep_the_embedding_functions_identity(storage, tmp_path):
    name = kind(storage)
    src, bk, rs = (dest_of(storage, tmp_path, n) for n in ("src", "bk", "rs"))
    with hs.DocumentArray(Word, storage=name, path=src, **disk(storage)) as da:
        da.extend([{"id": w, "word": w} for w in ("listen", "banana")])
        da.backup(bk)
    hs.restore(bk, rs)
    for path in (bk, rs):
        with pytest.raises(hs.ConfigError):  # another model than the one the vectors came from
            hs.DocumentArray(Word2, storage=name, path=path, **disk(storage))
        with hs.DocumentArray(Word, storage=name, path=path, **disk(storage)) as copy:
            assert copy.find(text="silent", vector="auto", limit=1).ids == ["listen"]
