"""find(vector=q) in reader threads while a writer adds, deletes and updates documents: every
answer must be a top-k the collection had at some instant of the call.

The model records each write before it starts and after it returns. An id is *stable* for a find
when it was present with no write in flight when the find started and no write touched it until
the find returned: it was there, with that one vector, at whatever instant the find read. So a
result must (1) hold ids that were ever written, once each, best first, each score the exact
similarity of one vector that id had; (2) hold every stable id scoring above its last hit (the
exact scan: none missing; the walk, at ef far above the collection's neighbourhoods: at most 1 %
of the stable ids it should hold); (3) be as long as min(k, stable ids) at least. The writer
grows the collection past two doublings of its blocks, so a find racing a growth would read a
freed block: a crash or garbage, not a quiet pass.
"""
import threading
import time

import numpy as np
import pytest

import hybridsearch as hs
from tests.models import exact_scores

DIM, K, START, WRITES = 8, 10, 600, 120


class Vec(hs.Document):
    embedding: hs.Vector[DIM]


class Model:
    """What the writer did: vectors per id (a version is recorded before the write storing it),
    writes started and finished per id, the ids whose add finished and whose delete has not begun."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.versions: dict = {}
        self.started: dict = {}
        self.finished: dict = {}
        self.alive: set = set()

    def begin(self, ids, vectors=None, deleting=False) -> None:
        with self.lock:
            for i, id_ in enumerate(ids):
                if vectors is not None:
                    self.versions.setdefault(id_, []).append(vectors[i])
                self.started[id_] = self.started.get(id_, 0) + 1
                if deleting:
                    self.alive.discard(id_)

    def end(self, ids, adding=False) -> None:
        with self.lock:
            for id_ in ids:
                self.finished[id_] = self.finished.get(id_, 0) + 1
                if adding:
                    self.alive.add(id_)

    def quiet(self) -> dict:
        """id -> writes started, for the present ids no write is touching now."""
        with self.lock:
            return {i: self.started[i] for i in self.alive if self.started[i] == self.finished[i]}

    def stable_since(self, quiet: dict) -> list:
        with self.lock:
            return [i for i, n in quiet.items() if self.started[i] == n and i in self.alive]


def writer(da, model: Model, rng, errors: list, stop: threading.Event, tally: dict) -> None:
    try:
        next_id = START
        for step in range(WRITES):
            # each write waits for a find after the last one (a loaded machine may otherwise run
            # the writes back to back before the readers get the GIL): finds and writes interleave
            seen, wait_until = tally["finds"], time.monotonic() + 2.0
            while step and tally["finds"] == seen and not stop.is_set() and time.monotonic() < wait_until:
                time.sleep(0.0005)
            op = step % 4
            if op in (0, 1):  # add a batch of new ids (never re-used)
                ids = [f"n{next_id + j}" for j in range(25)]
                next_id += 25
                X = rng.standard_normal((25, DIM)).astype(np.float32)
                model.begin(ids, X)
                da.extend_columns({"id": ids, "embedding": X})
                model.end(ids, adding=True)
            elif op == 2:  # delete a few present ids
                with model.lock:
                    pool = sorted(model.alive)
                ids = [pool[j] for j in rng.choice(len(pool), 8, replace=False)]
                model.begin(ids, deleting=True)
                da.delete(ids)
                model.end(ids)
            else:  # a new vector for one present id
                with model.lock:
                    pool = sorted(model.alive)
                id_ = pool[int(rng.integers(len(pool)))]
                v = rng.standard_normal(DIM).astype(np.float32)
                model.begin([id_], [v])
                da.update(id_, embedding=v)
                model.end([id_])
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))
    finally:
        stop.set()


def reader(da, model: Model, rng, metric: str, exact: bool, errors: list, stop: threading.Event,
           tally: dict) -> None:
    try:
        while not stop.is_set():
            q = rng.standard_normal(DIM).astype(np.float32)
            quiet = model.quiet()
            res = da.find(vector=q, limit=K, ef=400, exact=exact)
            stable = model.stable_since(quiet)
            with model.lock:
                versions = {i: list(model.versions.get(i, [])) for i in res.ids}
                stable_vectors = np.array([model.versions[i][-1] for i in stable]).reshape(-1, DIM)
            scores = res.scores.astype(np.float64)
            assert len(set(res.ids)) == len(res.ids), "an id twice"
            assert np.all(np.diff(scores) <= 1e-6), "not best first"
            for id_, s in zip(res.ids, scores):
                assert versions[id_], f"{id_} was never written"
                truth = exact_scores(np.array(versions[id_]), q, metric)
                assert np.min(np.abs(truth - s)) <= 1e-4 * max(1.0, abs(s)), (id_, s, truth)
            assert min(K, len(stable)) <= len(res.ids) <= K
            worst = scores[-1] if len(res.ids) == K else -np.inf
            ref = exact_scores(stable_vectors, q, metric)
            got = set(res.ids)
            should = [i for i, s in zip(stable, ref) if s > worst + 1e-4 * max(1.0, abs(worst))]
            tally["should"] += len(should)
            tally["missed"] += sum(1 for i in should if i not in got)
            tally["finds"] += 1
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(repr(e))
        stop.set()


# hnsw-disk: the float32 block in a file (vectors_on_disk, with its files): each growth maps the
# file anew and unmaps the old mapping, which a find racing it must never read
@pytest.mark.parametrize("storage,metric,exact", [("memory", "cosine", False), ("memory", "l2", False), ("sqlite", "cosine", False),
                                                  ("hnsw", "cosine", False), ("hnsw", "cosine", True),
                                                  ("hnsw", "l2", False), ("hnsw-disk", "cosine", False),
                                                  ("hnsw-disk", "cosine", True), ("hnsw-disk", "l2", False),
                                                  ("hnsw-rq", "cosine", False), ("hnsw-rq", "cosine", True)])
def test_finds_beside_a_writer_are_top_k_of_some_instant(storage, metric, exact, tmp_path):
    rng = np.random.default_rng(7)
    options = {"sqlite": {"path": tmp_path / "db.sqlite"},
               "hnsw-disk": {"path": tmp_path / "c", "vectors_on_disk": True},
               "hnsw-rq": {"path": tmp_path / "c", "vectors_on_disk": True, "quantization": "rabitq1"}}.get(storage, {})
    da = hs.DocumentArray(Vec, storage=storage.split("-")[0], metric=metric, **options)
    model = Model()
    ids = [f"n{i}" for i in range(START)]
    X = rng.standard_normal((START, DIM)).astype(np.float32)
    model.begin(ids, X)
    da.extend_columns({"id": ids, "embedding": X})
    model.end(ids, adding=True)
    errors: list = []
    stop = threading.Event()
    tally = {"should": 0, "missed": 0, "finds": 0}
    threads = [threading.Thread(target=reader, args=(da, model, np.random.default_rng(s), metric, exact, errors,
                                                     stop, tally)) for s in (1, 2)]
    threads.append(threading.Thread(target=writer, args=(da, model, np.random.default_rng(3), errors, stop, tally)))
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    assert not errors, errors[:3]
    assert tally["finds"] >= 20, tally  # the readers ran beside the writer
    allowed = 0 if exact or storage == "memory" else 0.01 * tally["should"]
    assert tally["missed"] <= allowed, tally
    assert len(da) == len(model.alive)
