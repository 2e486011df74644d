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


class Late(hs.Document):
    tag: hs.Keyword = "a"
    title: str = ""
    colbert: hs.MultiVector[4] = None


def test_a_multi_vector_batch_scans_the_index_once_and_reads_the_field_only(make_da, monkeypatch):
    """find_batched over a multi-vector field scans the matching documents once for the whole
    batch (not once per query), reading only the field and the bookkeeping fields; the answers
    are still MaxSim's exact top-k with whole documents."""
    from tests.models import maxsim_scores
    da = make_da(Late, metric="ip")
    rng = np.random.default_rng(3)
    blocks = {f"d{i}": rng.standard_normal((1 + i % 3, 4)).astype(np.float32) for i in range(40)}
    da.extend([{"id": i, "tag": "ab"[n % 2], "title": f"title {i}", "colbert": b}
               for n, (i, b) in enumerate(blocks.items())])
    storage, sources = da._storage, []
    scan = storage._scan

    def counted(query, limit, source):
        sources.append(source)
        return scan(query, limit, source)
    monkeypatch.setattr(storage, "_scan", counted)
    Qs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(5)]
    results = da.find_batched({"colbert": Qs}, limit=4, filter={"tag": "a"}, threads=1)
    assert len(sources) == 1
    assert sources[0] is not True and "title" not in sources[0]
    ids = [i for n, i in enumerate(blocks) if n % 2 == 0]
    for Q, res in zip(Qs, results):
        assert_topk_of(res, dict(zip(ids, maxsim_scores([blocks[i] for i in ids], Q, "ip"))), 4)
        assert [d.title for d in res.docs] == [f"title {i}" for i in res.ids]
