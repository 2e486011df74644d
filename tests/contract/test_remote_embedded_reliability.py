"""Reliability of the embedded engines we wrap: qdrant (qdrant-edge, with and without a path) and
annlite (in its child process, tests/storages/wrapped/test_annlite.py). Public API only.

- a sorted find racing deletes, and threads mixing reads and writes: nothing but typed errors,
  sorted answers, and readers that make progress beside writers;
- Results read after close: the documents or a typed error;
- a text query holding a lone surrogate answers as the memory storage does;
- a batch larger than one Qdrant operation, killed (SIGKILL) at random moments: every
  acknowledged call is there after reopening, the call in flight wholly or not at all;
- damaged files: the same documents or a BackendError naming what is damaged, never fewer
  documents read silently.
"""
import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import STORAGES

ROOT = Path(__file__).resolve().parents[2]
WRAPPED_ENGINES = ("qdrant", "qdrant-path", "annlite")
PATH_ENGINES = [s for s in ("qdrant-path", "annlite") if s in STORAGES]
TEXT_ENGINES = [s for s in ("qdrant", "qdrant-path") if s in STORAGES]

@contextlib.contextmanager
def _typed_or_recorded(untyped: list):
    """Runs a thread's call: a typed refusal is fine, a wrong answer (AssertionError) or an untyped
    exception is recorded in `untyped` (raised in a thread, it would be lost)."""
    try:
        yield
    except hs.HybridSearchError:
        pass
    except AssertionError as e:
        untyped.append(f"wrong answer: {e!r}")
    except Exception as e:  # noqa: BLE001 -- what the test looks for
        untyped.append(repr(e))



@pytest.fixture(params=[s for s in STORAGES if s in WRAPPED_ENGINES])
def storage(request):
    return request.param


class Doc(hs.Document):
    title: hs.Text = ""
    category: Optional[hs.Keyword] = None
    price: int = 0
    embedding: hs.Vector[4]


def doc(i: int, **kw) -> dict:
    d = dict(id=f"d{i}", title=f"word{i % 5} thing", category="abc"[i % 3], price=i,
             embedding=np.random.default_rng(i).standard_normal(4).astype(np.float32))
    d.update(kw)
    return d


def _name(storage: str) -> str:
    return "qdrant" if storage.startswith("qdrant") else storage


def _open(storage: str, path) -> hs.DocumentArray:
    return hs.DocumentArray(Doc, storage=_name(storage), path=str(path))


# --------------------------------------------------------------- threads (items 8 and 11)
def _run_threads(targets, seconds: float) -> None:
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)


def test_a_sorted_find_racing_deletes_raises_nothing_untyped_and_stays_sorted(make_da):
    da = make_da(Doc)
    da.extend([doc(i) for i in range(300)])
    stop = time.time() + 3
    untyped, finds = [], [0]

    def writer():
        rng = random.Random(1)
        while time.time() < stop:
            ids = rng.sample(range(300), 20)
            with _typed_or_recorded(untyped):
                da.delete([f"d{i}" for i in ids])
                da.extend([doc(i) for i in ids])

    def reader():
        while time.time() < stop:
            with _typed_or_recorded(untyped):
                res = da.find(filter={"price": {"$lt": 250}}, sort=[("price", "desc")], limit=None)
                docs = res.docs
                prices = [d.price for d in docs if d is not None]
                assert prices == sorted(prices, reverse=True)
                assert all(p < 250 for p in prices)
                finds[0] += 1

    _run_threads([writer, reader, reader], 3)
    assert not untyped, untyped[:5]
    assert finds[0] > 0


def _reads_and_writes(da, seconds: float, readers: int, writers: int) -> tuple:
    """(reads, writes, untyped errors) of threads running for `seconds`: readers mix a filter, an
    exact vector, a sorted and a count call; writers extend or delete one document."""
    stop = time.time() + seconds
    untyped, counts, lock = [], {"read": 0, "write": 0}, threading.Lock()

    def reader(seed):
        def run():
            rng = np.random.default_rng(seed)
            while time.time() < stop:
                i = int(rng.integers(260))
                with _typed_or_recorded(untyped):
                    k = i % 4
                    if k == 0:
                        got = da.find(filter={"id": f"d{i}"}, limit=1).docs
                        assert all(d is None or d.id == f"d{i}" for d in got)
                    elif k == 1:
                        assert len(da.find(vector=doc(i)["embedding"], limit=1, exact=True)) == 1
                    elif k == 2:
                        res = da.find(filter={"price": {"$lt": 40}}, sort=[("price", "desc")], limit=3)
                        prices = [d.price for d in res.docs if d is not None]
                        assert prices == sorted(prices, reverse=True)
                    else:
                        assert da.count(filter={"category": "a"}) >= 0
                    with lock:
                        counts["read"] += 1
        return run

    def writer(seed):
        def run():
            rng = np.random.default_rng(seed)
            while time.time() < stop:
                i = int(rng.integers(260))
                with _typed_or_recorded(untyped):
                    if rng.integers(2):
                        da.extend([doc(i, price=int(rng.integers(100)))])
                    else:
                        da.delete([f"d{i}"])
                    with lock:
                        counts["write"] += 1
        return run

    _run_threads([reader(n) for n in range(readers)] + [writer(10 + n) for n in range(writers)], seconds)
    return counts["read"], counts["write"], untyped


def test_readers_and_writers_in_threads_raise_nothing_untyped_and_readers_progress(make_da):
    """2 readers and 2 writers for 3 s: no untyped exception, and readers are not starved: their
    rate beside the writers, as a share of their rate alone, is at least a quarter of the
    writers' share (each measured alone first, one thread for 1 s)."""
    da = make_da(Doc)
    da.extend([doc(i) for i in range(200)])
    alone_reads, _, e1 = _reads_and_writes(da, 1, 1, 0)
    _, alone_writes, e2 = _reads_and_writes(da, 1, 0, 1)
    reads, writes, e3 = _reads_and_writes(da, 3, 2, 2)
    untyped = e1 + e2 + e3
    assert not untyped, untyped[:5]
    assert alone_reads > 0 and alone_writes > 0 and writes > 0
    read_share, write_share = reads / 3 / alone_reads, writes / 3 / alone_writes
    assert read_share >= write_share / 4, (reads, writes, alone_reads, alone_writes)


# ------------------------------------------------------------------ Results after close (item 8)
def test_results_read_after_close_are_the_documents_or_a_typed_error(make_da):
    da = make_da(Doc)
    da.extend([doc(i) for i in range(10)])
    by_filter = da.find(filter={"category": "a"}, limit=3)
    by_vector = da.find(vector=doc(4)["embedding"], limit=2)
    expected = {i: da[i] for i in by_filter.ids + by_vector.ids}
    da.close()
    for res in (by_filter, by_vector):
        for read in (lambda: res.docs, lambda: [res[0].doc]):
            try:
                got = read()
            except hs.HybridSearchError:
                continue
            assert [d.model_dump_json() for d in got] == [expected[d.id].model_dump_json() for d in got]


# ------------------------------------------------------------ text with a lone surrogate (item 8)
@pytest.mark.parametrize("text", ["\ud800", "word1 \ud800 thing", "word2\udfffword3", "\udc80word4"])
@pytest.mark.parametrize("storage", TEXT_ENGINES)  # annlite has no text search (tests/contract/test_lexical.py)
def test_a_text_query_holding_a_lone_surrogate_answers_as_the_memory_storage(make_da, storage, text):
    da = make_da(Doc)
    model = hs.DocumentArray(Doc, storage="memory")
    for c in (da, model):
        c.extend([doc(i) for i in range(12)])
    got, want = da.find(text=text, limit=20), model.find(text=text, limit=20)
    assert got.ids == want.ids
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-4)
    assert da.count(text=text) == model.count(text=text)
    model.close()


# ------------------------------------------------------ kill -9 during batches over a chunk (item 4)
BATCH = 2510  # more than one Qdrant operation holds (2,000 points)
_KILLED = """
import sys
import hybridsearch as hs
from tests.contract.test_remote_embedded_reliability import BATCH, _open, doc
da = _open(sys.argv[1], sys.argv[2])
for k in range(1, 1000):
    da.extend([doc(k * 10_000 + i, price=-1) for i in range(BATCH)])
    print("E", k, flush=True)
    da.update_many({"price": {"$lt": 10**6}}, price=k)
    print("U", k, flush=True)
"""


def _states(acked: list) -> list:
    """The two states the collection may be in ({id: price}): the acknowledged calls applied,
    and those plus the next (in-flight) call."""
    def apply(calls):
        state = {}
        for kind, k in calls:
            if kind == "E":
                state.update({f"d{k * 10_000 + i}": -1 for i in range(BATCH)})
            else:
                state = {i: k for i in state}
        return state
    if not acked:
        nxt = ("E", 1)
    else:
        kind, k = acked[-1]
        nxt = ("U", k) if kind == "E" else ("E", k + 1)
    return [apply(acked), apply(acked + [nxt])]


@pytest.fixture(params=PATH_ENGINES)
def path_storage(request):
    return request.param


@pytest.mark.parametrize("round_", range(2))
def test_kill_9_during_large_batches_keeps_every_call_whole(tmp_path, path_storage, round_):
    storage = path_storage
    path = tmp_path / "col"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, storage, str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked = []
    want = 2 + round_  # acknowledged calls before the kill, then a random moment inside the next
    for line in proc.stdout:
        kind, k = line.split()
        acked.append((kind, int(k)))
        if len(acked) >= want:
            break
    time.sleep(random.Random(round_).uniform(0.02, 0.4))
    proc.send_signal(signal.SIGKILL)
    rest, err = proc.communicate(timeout=120)
    assert len(acked) >= want, err[-3000:]
    acked += [(kind, int(k)) for kind, k in (line.split() for line in rest.splitlines())]
    with _open(storage, path) as da:
        cols = da.to_columns(["id", "price"])
        got = dict(zip(cols["id"], (int(p) for p in cols["price"])))
    before, after = _states(acked)
    assert got in (before, after), (
        f"{len(got)} documents: neither the {len(before)} acknowledged nor the {len(after)} with the call in "
        f"flight; prices {sorted(set(got.values()))}")


# ------------------------------------------------------------------ damaged files (item 9)
def _files(path: Path) -> list:
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def _damage(target: Path, how: str, rng: random.Random) -> None:
    if how == "delete":
        target.unlink()
    elif how == "empty":
        os.truncate(target, 0)
    elif how == "half":
        os.truncate(target, target.stat().st_size // 2)
    else:  # three bytes inverted
        size = target.stat().st_size
        with open(target, "r+b") as f:
            for _ in range(3 if size else 0):
                pos = rng.randrange(size)
                f.seek(pos)
                b = f.read(1)
                f.seek(pos)
                f.write(bytes([b[0] ^ 0xFF]))


@pytest.mark.parametrize("seed", range(2))
def test_damaged_files_read_the_same_documents_or_raise_a_backend_error(tmp_path, path_storage, seed):
    """A collection closed cleanly, one of its files damaged (deleted, emptied, cut in half, bytes
    inverted): reopening reads back every document exactly, or raises BackendError naming the
    collection's folder or the file. Fewer documents read silently, or any other exception, fail."""
    rng = random.Random(seed)
    written = [doc(i) for i in range(60)]
    base = tmp_path / "base"
    with _open(path_storage, base) as da:
        da.extend(written)
    want = {d["id"]: Doc(**d).model_dump_json() for d in written}
    files = [p.relative_to(base) for p in _files(base)]
    # the small files (metadata, manifests, logs) hold the most at stake: always some of them
    small = [f for f in files if (base / f).stat().st_size < 4096]
    picks = rng.sample(small, min(6, len(small))) + rng.sample(files, min(6, len(files)))
    failures = []
    for n, rel in enumerate(picks):
        how = ["delete", "empty", "half", "flip"][(n + seed) % 4]
        path = tmp_path / f"trial{n}"
        _copy(base, path)
        _damage(path / rel, how, rng)
        try:
            with _open(path_storage, path) as da:
                got = {d.id: d.model_dump_json() for d in da}
                assert len(da) == len(got)
        except hs.BackendError as e:
            if str(path) not in str(e):
                failures.append(f"{how} {rel}: the error does not name {path}: {e}")
            continue
        except BaseException as e:  # noqa: BLE001 -- a raw exception (a pyo3 panic is a BaseException)
            failures.append(f"{how} {rel}: {type(e).__name__}: {str(e)[:200]}")
            continue
        if got != want:
            failures.append(f"{how} {rel}: read {len(got)} documents, {sum(got.get(i) == v for i, v in want.items())}"
                            f" of the {len(want)} written, without an error")
    assert not failures, "\n".join(failures)


def _copy(src: Path, dst: Path) -> None:
    """A copy of the folder keeping its sparse files sparse (Qdrant preallocates large mmaps)."""
    subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dst)], check=True)


# ------------------------------------------------------------- finds once the optimizer is due
@pytest.mark.parametrize("storage", TEXT_ENGINES)  # optimize_after is qdrant's option
def test_finds_after_optimize_after_points_run_the_optimizer_and_answer_exactly(make_da, storage):
    """A vector or hybrid find that first runs Qdrant's optimizer (once `optimize_after` points
    were written) answers the exact top hits, as before the optimizer was due. (Its optimizer
    is a write: run inside the find's read section it raised RuntimeError.)"""
    from tests.models import check_topk, exact_scores
    da = make_da(Doc, optimize_after=5)
    docs = [doc(i) for i in range(30)]
    X = np.stack([d["embedding"] for d in docs])
    ids = [d["id"] for d in docs]
    for round_ in range(2):  # due after the first extend, and again after the second
        da.extend(docs[15 * round_:15 * round_ + 15])
        n = 15 * round_ + 15
        q = np.random.default_rng(100 + round_).standard_normal(4).astype(np.float32)
        res = da.find(vector=q, limit=5, exact=True)
        check_topk(res.ids, res.scores, ids[:n], exact_scores(X[:n], q, "cosine"), 5)
        da.extend([doc(100 + 10 * round_ + i) for i in range(6)])  # due again for the hybrid find
        hybrid = da.find(text="word1", vector=q, limit=3)
        assert hybrid.ids and set(hybrid.ids) <= set(da.find(filter={}, limit=None).ids)
        da.delete([f"d{100 + 10 * round_ + i}" for i in range(6)])
