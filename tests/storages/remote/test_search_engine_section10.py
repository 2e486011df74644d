"""Section-10 paths of storage="elasticsearch" / "opensearch" that a healthy node with default
settings does not take through the public API alone, against real nodes on 127.0.0.1.

Reaches below the API: to make the engine refuse a sparse query for its clause count, the
storage's own estimate (vectors.MAX_CLAUSES) is raised so the query is sent; and to interleave
two clients' writes, the storage's read of a document (`_mget`) is wrapped so another client
writes between one update's read and its write (a private name: no public API interleaves)."""
import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.storages.remote.elasticsearch import vectors
from tests.contract.section10 import assert_topk_of
from tests.conftest import storage_fixture

storage = storage_fixture(("elasticsearch", "opensearch"))


class Doc(hs.Document):
    tag: hs.Keyword = "a"
    splade: hs.SparseVector = {}


def dot_model(docs: dict, q: dict, allowed) -> dict:
    out = {}
    for i, d in docs.items():
        shared = set(q) & set(d.splade)
        if shared and i in allowed:
            out[i] = sum(float(np.float32(q[k])) * d.splade[k] for k in shared)
    return out


def test_a_sparse_query_the_engine_refuses_for_its_clauses_is_scanned(make_da, monkeypatch):
    """The engine's too-many-clauses refusal (its limit lower than the storage estimates) is not
    the caller's error: the list is the exact scan, equal to the model."""
    da = make_da(Doc)
    rng = np.random.default_rng(11)
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 2],
                "splade": {int(k): float(rng.choice([0.5, 1.0, 2.0])) for k in rng.choice(20000, 12, replace=False)}}
               for i in range(30)])
    docs = {d.id: d for d in da}
    q = {int(k): 1.0 for k in rng.choice(20000, 20000 - 1, replace=False)}  # beyond any node's limit
    monkeypatch.setattr(vectors, "MAX_CLAUSES", 10 ** 6)
    allowed = {i for i, d in docs.items() if d.tag == "a"}
    assert_topk_of(da.find(vector={"splade": q}, limit=5, filter={"tag": "a"}), dot_model(docs, q, allowed), 5)


def two_handles(make_da):
    """Two DocumentArrays (two storages, two clients) on one index holding d0 and d1."""
    a = make_da(Doc)
    a.extend([{"id": "d0", "tag": "a", "splade": {1: 1.0}}, {"id": "d1", "tag": "b", "splade": {2: 1.0}}])
    b = make_da(Doc, index=a._storage.index)
    return a, b


def writes_between_read_and_write(monkeypatch, da, write, times: int) -> list:
    """Wraps da's storage read of documents so that `write()` (another client's) runs right after
    each of its first `times` reads. -> the list of the writes done, one entry each."""
    storage, done = da._storage, []
    read = storage._mget

    def interleaved(*args, **kwargs):
        out = read(*args, **kwargs)
        if len(done) < times:
            done.append(write(len(done)))
        return out
    monkeypatch.setattr(storage, "_mget", interleaved)
    return done


def test_a_sparse_update_keeps_a_concurrent_write_by_another_client(make_da, monkeypatch):
    """update() of a sparse field reads the document and writes it whole: another client's write
    landing in between is not overwritten by the stale copy (both updates survive)."""
    a, b = two_handles(make_da)
    done = writes_between_read_and_write(monkeypatch, a, lambda n: b.update("d0", tag="z"), 1)
    a.update("d0", splade={5: 1.0})
    assert done
    assert (b["d0"].tag, b["d0"].splade) == ("z", {5: 1.0})
    assert (b["d1"].tag, b["d1"].splade) == ("b", {2: 1.0})
    assert a.find(vector={"splade": {5: 1.0}}, limit=5, filter={"tag": "z"}).ids == ["d0"]


def test_a_sparse_update_losing_every_race_is_a_backend_error(make_da, monkeypatch):
    """When another client writes between every read and write, the update gives up with
    BackendError after a few tries, and the other client's last write stands."""
    a, b = two_handles(make_da)
    done = writes_between_read_and_write(monkeypatch, a, lambda n: b.update("d0", tag=f"t{n}"), 100)
    with pytest.raises(hs.BackendError, match="another client"):
        a.update("d0", splade={5: 1.0})
    assert 1 < len(done) < 100
    assert (b["d0"].tag, b["d0"].splade) == (f"t{len(done) - 1}", {1: 1.0})
