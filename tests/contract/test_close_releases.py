"""close() releases what a collection holds, and a collection dropped without close() does too
(issue 32, item 5), on every storage with files and a writer's lock: memory and hnsw with
`path=` (hnsw also with vectors_on_disk=True, whose scratch file goes with the rest), sqlite.

- After close() of a writer and of a read-only opener, this process holds no descriptor
  (/proc/self/fd) and no mapping (/proc/self/maps) of the collection's files, and another
  process takes the writer's lock at once.
- A writer dropped without close() releases its lock when its last reference goes (`del da`, the
  cycle collector disabled): another process opens it for writing and sees every write.
- A child process that exits without close() (the interpreter's exit, atexit) leaves files that
  reopen with every call it acknowledged.
- An unclosed writer is reported by a ResourceWarning (as an unclosed file is); a read-only
  opener, a closed writer and a `with` block are not.

The second process is a spawned interpreter (not a thread): flock is per open file, so only
another process shows what a real second worker sees.
"""
import gc
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import DISK_OPTIONS, STORAGES
from tests.models import matches

ROOT = Path(__file__).resolve().parents[2]
FILE_BACKED = [s for s in ("memory-path", "hnsw-path", "hnsw-disk", "hnsw-rq", "sqlite") if s in STORAGES]


class Doc(hs.Document):
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    embedding: Optional[hs.Vector[4]] = None


def docs(prefix: str, n: int, price: int = 0) -> list:
    rng = np.random.default_rng(len(prefix) * 1000 + n)
    return [dict(id=f"{prefix}{i}", title=f"word{i % 3} {prefix}", category="ab"[i % 2], price=price + i,
                 embedding=rng.standard_normal(4).astype(np.float32)) for i in range(n)]


def where(storage: str, tmp_path) -> str:
    return str(tmp_path / ("c.db" if storage == "sqlite" else "c"))


def open_da(storage: str, path: str, **options):
    name = {"hnsw-path": "hnsw", "hnsw-disk": "hnsw", "hnsw-rq": "hnsw", "memory-path": "memory"}.get(storage, storage)
    for k, v in DISK_OPTIONS.get(storage, {}).items():
        options.setdefault(k, v)
    return hs.DocumentArray(Doc, storage=name, path=path, **options)


def state(da) -> dict:
    return {d.id: (d.title, d.category, d.price) for d in da}


def held(folder: str) -> list:
    """This process's descriptors and mappings of files under `folder`."""
    folder = os.path.realpath(folder)
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, closed meanwhile
            continue
        if target.startswith(folder):
            out.append(f"fd {fd} -> {target}")
    with open("/proc/self/maps") as f:
        out += [f"map {line.split(None, 5)[-1].strip()}" for line in f if folder in line]
    return out


# ------------------------------------------------------------------ the other process
def child(storage: str, path: str, what: str) -> None:
    """Run in a spawned interpreter: "write" opens as a writer (lock_timeout 0: refused at once
    if the lock is held), adds one document and closes; "exit" writes acknowledged calls and
    leaves without close()."""
    if what == "write":
        with open_da(storage, path) as da:
            da.extend(docs("child", 1, 900))
        print("wrote", flush=True)
    elif what == "exit":
        da = open_da(storage, path)
        for k, call in enumerate(exit_calls(), 1):
            apply(da, call)
            print(f"ack {k}", flush=True)
        # no close(): the interpreter's exit has to leave the files valid


def exit_calls() -> list:
    return [("extend", docs("x", 30)), ("update_many", {"category": "a"}, {"price": 7}),
            ("extend", docs("y", 10, 100)), ("update_many", {"price": {"$gte": 105}}, {"title": "late"})]


def apply(da, call: tuple) -> None:
    if call[0] == "extend":
        da.extend(call[1])
    else:
        da.update_many(call[1], **call[2])


def model(calls: list) -> dict:
    m: dict = {}
    for call in calls:
        if call[0] == "extend":
            m.update({d["id"]: dict(d) for d in call[1]})
        else:
            for d in m.values():
                if matches(d, call[1]):
                    d.update(call[2])
    return {k: (d["title"], d["category"], d["price"]) for k, d in m.items()}


def spawn(storage: str, path: str, what: str) -> subprocess.CompletedProcess:
    code = "import sys\nfrom tests.contract.test_close_releases import child\nchild(*sys.argv[1:])\n"
    return subprocess.run([sys.executable, "-c", code, storage, path, what], cwd=ROOT, capture_output=True,
                          timeout=120)


def other_process_writes(storage: str, path: str) -> None:
    done = spawn(storage, path, "write")
    assert done.returncode == 0 and b"wrote" in done.stdout, done.stderr[-2000:].decode()


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("storage", FILE_BACKED)
def test_close_releases_every_descriptor_map_and_the_lock_at_once(storage, tmp_path):
    path = where(storage, tmp_path)
    with open_da(storage, path) as da:
        da.extend(docs("a", 50))
    da = open_da(storage, path)  # this open maps the snapshot the first close wrote
    da.extend(docs("b", 5))
    reader = open_da(storage, path, read_only=True)
    assert len(reader) == 55
    assert held(str(tmp_path)), "the test must see what an open collection holds"
    da.close()
    reader.close()
    # nothing collected: close() itself released them
    assert held(str(tmp_path)) == []
    other_process_writes(storage, path)
    with open_da(storage, path) as again:
        assert len(again) == 56


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_a_writer_dropped_without_close_releases_its_lock_and_keeps_its_writes(storage, tmp_path):
    path = where(storage, tmp_path)
    da = open_da(storage, path)
    da.extend(docs("a", 20))
    da.update_many({"category": "a"}, price=-1)
    expected = state(da)
    gc.disable()  # dropping the last reference releases the lock then, not a later collection
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # asserted by the test below
            del da
        other_process_writes(storage, path)
    finally:
        gc.enable()
    gc.collect()  # collecting what is left releases nothing twice
    other_process_writes(storage, path)
    with open_da(storage, path) as again:
        got = state(again)
    assert got == {**expected, **model([("extend", docs("child", 1, 900))])}  # written twice, same document


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_a_child_that_exits_without_close_leaves_files_with_every_acknowledged_write(storage, tmp_path):
    path = where(storage, tmp_path)
    done = spawn(storage, path, "exit")
    assert done.returncode == 0, done.stderr[-2000:].decode()
    acked = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith(b"ack ")]
    assert acked == list(range(1, len(exit_calls()) + 1))
    with open_da(storage, path) as again:
        assert state(again) == model(exit_calls())
        assert again.count() == len(model(exit_calls()))


@pytest.mark.parametrize("storage", FILE_BACKED)
def test_a_resource_warning_names_an_unclosed_writer_and_only_a_writer(storage, tmp_path):
    path = where(storage, tmp_path)

    def warned(make) -> list:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make()
            gc.collect()
        return [w for w in caught if issubclass(w.category, ResourceWarning)]

    def unclosed_writer():
        da = open_da(storage, path)
        da.extend(docs("a", 3))

    found = warned(unclosed_writer)
    assert len(found) == 1 and path in str(found[0].message), [str(w.message) for w in found]
    assert found[0].source is not None  # source=: tracemalloc can show where it was opened

    def unclosed_reader():
        open_da(storage, path, read_only=True).count()

    def closed_writer():
        open_da(storage, path).close()

    def with_block():
        with open_da(storage, path) as da:
            da.extend(docs("b", 2))

    for make in (unclosed_reader, closed_writer, with_block):
        assert warned(make) == [], make.__name__
    with open_da(storage, path) as again:  # the unwarned paths all released the lock too
        assert len(again) == 5
