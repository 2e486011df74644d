"""storage="qdrant" specifics, on the real engine (qdrant-edge in the process; qdrant-client's local
mode for the url= code path): point ids, the filter compiler's Qdrant models and refusals,
reopening a path, the exact fallback of a vector query answered short, keyword ranges, BM25
equal to the memory storage's. The shared suite (tests/contract) runs on "qdrant" too."""
import uuid

import numpy as np
import pytest

import hybridsearch as hs
from hybridsearch.document import schema_of
from hybridsearch.query.filters import parse_filter
from tests.models import FilterItem as Item
from tests.models import matches

qdrant_edge = pytest.importorskip("qdrant_edge",
                                  reason="qdrant-edge-py is not installed (pip install 'hybridsearch[qdrant]')")
from hybridsearch.storages.remote.qdrant import filters as F  # noqa: E402
from hybridsearch.storages.remote.qdrant.storage import QdrantStorage, point_id  # noqa: E402


class Product(hs.Document):
    title: hs.Text
    category: hs.Keyword = "a"
    price: int = 0
    rating: float = 0.0
    embedding: hs.Vector[4]


def products(n, seed=0):
    rng = np.random.default_rng(seed)
    words = "red blue phone case cable charger fast wireless".split()
    return [dict(id=f"p{i}", title=" ".join(rng.choice(words, 3)), category="abc"[i % 3], price=i,
                 rating=float(i % 7) / 2, embedding=rng.standard_normal(4)) for i in range(n)]


def test_point_ids_are_uuid5_with_the_id_in_the_payload(tmp_path):
    da = hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s")
    da.extend(products(3))
    da.close()
    shard = qdrant_edge.EdgeShard.load(str(tmp_path / "s"))
    try:
        recs = shard.retrieve([point_id("p1")], with_payload=True, with_vector=False)
        assert [r.payload["hs_id"] for r in recs] == ["p1"]
        assert uuid.UUID(str(recs[0].id)).version == 5 and point_id("p1") != point_id("p2")
    finally:
        shard.close()


def test_reopen_keeps_every_write_and_the_insertion_order(tmp_path):
    path = tmp_path / "s"
    da = hs.DocumentArray(Product, storage="qdrant", path=path)
    docs = products(30)
    da.extend(docs)
    da.delete(["p3", "p4"])
    da.update("p5", price=500)
    da.close()
    again = hs.DocumentArray(Product, storage="qdrant", path=path)
    try:
        assert len(again) == 28 and again["p5"].price == 500 and "p3" not in again
        again.append(dict(id="new", title="red", embedding=[1, 0, 0, 0]))
        assert list(again.find(filter={}, limit=None).ids)[-1] == "new"  # numbering continued
        assert np.array_equal(again["p7"].embedding, np.asarray(docs[7]["embedding"], dtype=np.float32))
        assert again.find(text="red", limit=3).ids
    finally:
        again.close()


def _tree(flt, values=lambda key: []):
    return F.Compiler(schema_of(Item), values).compile(parse_filter(flt, schema_of(Item)))


def test_filters_compile_to_qdrant_conditions():
    assert _tree({"price": 3}) == ("eq", "price", 3)
    assert _tree({"category": {"$in": ["a", "b"]}}) == ("any", "category", ["a", "b"])
    assert _tree({"price": {"$ne": 3}}) == ("not", ("eq", "price", 3))  # must_not: also without a value
    assert _tree({"price": {"$gt": 2.5}}) == ("range", "price", {"gt": 2.0})  # int field: int bound
    assert _tree({"rating": 1.5}) == ("range", "rating", {"gte": 1.5, "lte": 1.5})
    assert _tree({"brand": {"$exists": True}}) == ("eq", "hs_present", "brand")
    assert _tree({"price": {"$lt": float("inf")}}) == F.ALL  # a required int always has a value
    assert _tree({"$or": [{"price": {"$in": []}}, {"id": "d1"}]}) == ("eq", "hs_id", "d1")
    assert _tree({"category": {"$gt": "a"}}, lambda key: ["Books", "a", "c"]) == ("any", "category", ["c"])
    edge = F.build(_tree({"$not": {"category": {"$in": ["a"]}}, "price": {"$gte": 1}}), qdrant_edge, True)
    assert isinstance(edge, qdrant_edge.Filter)
    from qdrant_client import models
    client = F.build(_tree({"$or": [{"brand": "n"}, {"rating": {"$lt": 0}}]}), models, False)
    assert isinstance(client, models.Filter) and len(client.should) == 2


def test_what_qdrant_cannot_say_is_refused():
    with pytest.raises(hs.UnsupportedError, match="2\\*\\*53"):
        _tree({"price": {"$gt": 2 ** 60}})


def test_keyword_ranges_and_filters_match_the_model():
    da = hs.DocumentArray(Item, storage="qdrant")
    rows = [Item(id=f"d{i}", category=["a", "Books", "c", "b"][i % 4], brand=[None, "n"][i % 2], price=i - 3,
                 in_stock=bool(i % 3), vec=[1, i]).model_dump() for i in range(12)]
    da.extend(rows)
    for flt in ({"category": {"$gte": "b"}}, {"id": {"$lt": "d3"}}, {"$not": {"brand": {"$lte": "n"}}},
                {"price": {"$nin": [0, 1]}, "in_stock": True}, {"brand": {"$exists": False}}):
        assert da.find(filter=flt, limit=None).ids == [r["id"] for r in rows if matches(r, flt)], flt
    da.close()


def test_a_short_vector_answer_falls_back_to_exact():
    """HNSW under a selective filter may return fewer than min(limit, matches): that query is
    asked again exactly. A stand-in engine drops the last approximate hit."""
    st = QdrantStorage(schema_of(Product), QdrantStorage.Config.parse("qdrant", {}))
    da_docs = [schema_of(Product).model.model_validate(d) for d in products(40)]
    from hybridsearch.batch import Batch
    st.upsert(Batch(schema_of(Product), [d.id for d in da_docs], given_docs=da_docs))
    real = st.q
    calls = []

    class Short:
        def __getattr__(self, name):
            return getattr(real, name)

        def nearest(self, queries, limit, tree, ef, exact, full=True, field=None):
            calls.append(exact)
            out = real.nearest(queries, limit, tree, ef, exact, full, field)
            return out if exact else [r[:-1] for r in out]

    st.q = Short()
    q = np.array([[0.5, -1, 0, 2]], dtype=np.float32)
    node = parse_filter({"category": "a"}, schema_of(Product))
    ids, scores, _ = st.search_vectors(q, 5, node, False, None)[0]
    X = np.array([d.embedding for d in da_docs if d.category == "a"])
    ref = X @ q[0] / (np.linalg.norm(X, axis=1) * np.linalg.norm(q[0]))
    assert np.allclose(scores, np.sort(ref)[::-1][:5], atol=1e-5) and calls == [False, True]
    st.q = real
    st.close()


def test_bm25_equals_the_memory_storage():
    """Qdrant's BM25 (divided by its k1 + 1 factor) against ours: same top-10, same scores,
    also after deletes and overwrites."""
    docs = products(200, seed=3)
    qd, mem = hs.DocumentArray(Product, storage="qdrant"), hs.DocumentArray(Product)
    for da in (qd, mem):
        da.extend(docs)
        da.delete([f"p{i}" for i in range(0, 200, 7)])
        da.update("p1", title="red red red cable")
    for text in ("red phone", "fast wireless charger", "cable", "cases"):
        a, b = qd.find(text=text, limit=10), mem.find(text=text, limit=10)
        assert a.ids == b.ids and np.allclose(a.scores, b.scores, rtol=1e-5), text
    qd.close()


def test_the_client_code_path_on_the_local_mode():
    """url=":memory:": the same API through qdrant-client (its pure-Python local mode)."""
    da = hs.DocumentArray(Product, storage="qdrant", url=":memory:")
    docs = products(25)
    da.extend(docs)
    assert len(da) == 25 and da["p4"].price == 4
    assert da.find(filter={"price": {"$lt": 3}}).ids == ["p0", "p1", "p2"]
    q = np.array([1, 0, 0, 0], dtype=np.float32)
    X = np.array([d["embedding"] for d in docs], dtype=np.float64)
    ref = X @ q / np.linalg.norm(X, axis=1)
    res = da.find(vector=q, limit=3)
    assert np.allclose(res.scores, np.sort(ref)[::-1][:3], atol=1e-5)
    assert da.count(filter={"category": "a"}) == 9 and da.facets("category")[0] == ("a", 9)
    assert da.delete(filter={"category": "b"}) == 8 and len(da) == 17
    assert da.find(text="red", limit=5).ids  # BM25 of the local mode's default tokenizer
    da.close()


def test_path_and_url_together_are_refused(tmp_path):
    with pytest.raises(hs.ConfigError, match="not both"):
        hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s", url=":memory:")


def test_a_second_writer_on_a_path_is_refused(tmp_path):
    da = hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s")
    da.extend(products(2))
    with pytest.raises(hs.BackendError, match="already open by another writer"):
        hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s")
    assert len(da) == 2
    da.close()


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_hybrid_sum_reading_matches_best_first_equals_the_memory_storage(metric):
    """"sum" reads the lexical matches a growing number at a time and stops when none left out
    can win: the same hits and scores as the memory storage, which scores every match."""
    docs = products(600, seed=7)
    qd, mem = hs.DocumentArray(Product, storage="qdrant", metric=metric), hs.DocumentArray(Product, metric=metric)
    for da in (qd, mem):
        da.extend(docs)
    rng = np.random.default_rng(1)
    for text in ("red phone", "cable", "fast wireless charger", "case"):
        q = rng.standard_normal(4)
        for k, candidates in ((10, 10), (3, 50), (20, 5)):
            a = qd.find(text=text, vector=q, limit=k, candidates=candidates, exact=True)
            b = mem.find(text=text, vector=q, limit=k, candidates=candidates, exact=True)
            assert np.allclose(a.scores, b.scores, rtol=1e-5, atol=1e-6), (text, k, candidates)
            assert set(a.ids) == set(b.ids) or np.isclose(a.scores[-1], a.scores[-2]), (text, k, candidates)
    qd.close()


def test_a_shard_opened_with_another_schema_or_metric_is_refused(tmp_path):
    hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s").close()
    with pytest.raises(hs.ConfigError, match="another schema or metric"):
        hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s", metric="l2")
    with pytest.raises(hs.ConfigError, match="another schema or metric"):
        hs.DocumentArray(Item, storage="qdrant", path=tmp_path / "s")
    hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s").close()


# ------------------------------------------- kill -9 between chunks, damaged files, hostile input
_KILLED_BETWEEN_CHUNKS = """
import os, signal, sys
import numpy as np
import hybridsearch as hs
from tests.storages.remote.test_qdrant import Product, products
path, what = sys.argv[1], sys.argv[2]
da = hs.DocumentArray(Product, storage="qdrant", path=path)
da.extend(products(2510) if what == "update" else products(100))
print("acked", flush=True)


class KillAfterFirstOperation:
    # The shard as the storage holds it, killing the process (SIGKILL) right after the first
    # operation of the next write has been applied: the only way to stop between two chunks of
    # one call exactly (qdrant_edge.EdgeShard is a native class whose methods cannot be replaced).
    def __init__(self, shard):
        self.shard = shard

    def __getattr__(self, name):
        return getattr(self.shard, name)

    def update(self, op):
        self.shard.update(op)
        os.kill(os.getpid(), signal.SIGKILL)


da._storage.q.shard = KillAfterFirstOperation(da._storage.q.shard)
if what == "update":
    da.update_many({"price": {"$gte": 0}}, rating=99.0)
else:
    da.extend([dict(d, id=f"n{d['id']}") for d in products(2510, seed=1)])
print("not killed", flush=True)
"""


@pytest.mark.parametrize("what", ["extend", "update"])
def test_a_kill_between_the_chunks_of_one_call_leaves_it_whole_after_reopening(tmp_path, what):
    """A call over more than 2,000 points is several Qdrant operations; the process is killed
    (SIGKILL) right after the first: after reopening, the call is there whole (it was recorded
    before its first operation) and the acknowledged write before it too."""
    import signal
    import subprocess
    import sys
    from pathlib import Path
    path = tmp_path / "s"
    proc = subprocess.run([sys.executable, "-c", _KILLED_BETWEEN_CHUNKS, str(path), what],
                          cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL and proc.stdout.split() == ["acked"], proc.stdout + proc.stderr[-3000:]
    with hs.DocumentArray(Product, storage="qdrant", path=path) as da:
        got = {d.id: d.rating for d in da}
    if what == "extend":
        assert set(got) == {f"p{i}" for i in range(100)} | {f"np{i}" for i in range(2510)}, len(got)
    else:
        assert set(got) == {f"p{i}" for i in range(2510)}
        assert sorted(set(got.values())) == [99.0], f"{sum(v == 99.0 for v in got.values())} of 2510 updated"


def test_a_damaged_intent_record_is_a_backend_error_naming_it(tmp_path):
    hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s").close()
    (tmp_path / "s" / "hybridsearch-intent.json").write_text('{"format": "hybridsearch-qdrant-intent", "vers')
    with pytest.raises(hs.BackendError, match="hybridsearch-intent.json"):
        hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s")


def test_a_damaged_shard_file_is_a_backend_error_not_a_panic(tmp_path):
    """qdrant-edge panics (pyo3's PanicException, a BaseException) on an emptied status file of a
    payload index: the open, or the first read, raises BackendError naming the folder."""
    with hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s") as da:
        da.extend(products(50))
    damaged = sorted((tmp_path / "s").glob("segments/*/payload_index/*-null/has_values/status.dat"))
    assert damaged
    for f in damaged:
        f.write_bytes(b"")
    with pytest.raises(hs.BackendError, match=str(tmp_path / "s")):
        with hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s") as da:
            list(da)


def test_a_missing_or_damaged_fingerprint_beside_a_shard_is_a_backend_error(tmp_path):
    with hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s") as da:
        da.extend(products(5))
    fp = tmp_path / "s" / "hybridsearch-schema.json"
    text = fp.read_text()
    for damage in ("", text[: len(text) // 2], None):
        if damage is None:
            fp.unlink()
        else:
            fp.write_text(damage)
        with pytest.raises(hs.BackendError, match="hybridsearch-schema.json"):
            hs.DocumentArray(Product, storage="qdrant", path=tmp_path / "s")
