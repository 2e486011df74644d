"""The shared suite: DocumentArray semantics on every storage, against plain Python/numpy models."""
import threading
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import EXACT_STORAGES
from tests.models import check_topk, exact_scores, matches


class Product(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    category: hs.Keyword
    price: int = 0
    average_rating: float = 0.0
    in_stock: bool = True
    embedding: hs.Vector[8]


def product(i, rng=None, **kw):
    rng = rng or np.random.default_rng(i)
    d = dict(id=f"p{i}", title=f"item {i}", category=["Books", "Toys", "Food"][i % 3], price=i,
             average_rating=(i % 5) / 2, in_stock=bool(i % 2), embedding=rng.standard_normal(8))
    d.update(kw)
    return d


# ------------------------------------------------------------------- CRUD
def test_extend_len_contains_get_iter(make_da):
    da = make_da(Product)
    da.extend([product(i) for i in range(10)])
    assert len(da) == 10 and "p3" in da and "nope" not in da and 3 not in da
    doc = da["p3"]
    assert isinstance(doc, Product) and doc.price == 3 and doc.category == "Books"
    np.testing.assert_allclose(doc.embedding, product(3)["embedding"].astype(np.float32))
    assert [d.id for d in da] == [f"p{i}" for i in range(10)]


def test_append_and_random_id(make_da):
    da = make_da(Product)
    da.append(Product(title="t", category="c", embedding=np.ones(8)))
    (doc,) = list(da)
    assert len(doc.id) == 32 and doc.id in da


def test_extend_is_atomic(make_da):
    da = make_da(Product)
    da.extend([product(0)])
    bad = [product(1), product(2, embedding=[1.0, 2.0]), product(3)]
    with pytest.raises(hs.SchemaError, match="embedding"):
        da.extend(bad)
    assert len(da) == 1 and "p1" not in da and "p3" not in da
    with pytest.raises(hs.SchemaError):
        da.extend([product(4), "not a document"])
    assert len(da) == 1


def test_upsert_overwrites_in_place_and_last_duplicate_wins(make_da):
    da = make_da(Product)
    da.extend([product(i) for i in range(3)])
    da.extend([product(1, price=100), product(5), product(5, price=55)])
    assert [d.id for d in da] == ["p0", "p1", "p2", "p5"]
    assert da["p1"].price == 100 and da["p5"].price == 55
    assert da.find(filter={"price": {"$gte": 55}}).ids == ["p1", "p5"]


def test_setitem_sets_the_id(make_da):
    da = make_da(Product)
    da["k1"] = Product(**product(9))
    assert "k1" in da and "p9" not in da and da["k1"].id == "k1"
    da["k1"] = product(9, price=-5)
    assert len(da) == 1 and da["k1"].price == -5


def test_update_touches_only_named_fields(make_da):
    da = make_da(Product)
    da.extend([product(i) for i in range(5)])
    before = da["p2"]
    da.update("p2", price=1269, in_stock=True)
    after = da["p2"]
    assert after.price == 1269 and after.in_stock is True
    assert after.title == before.title and after.category == before.category
    np.testing.assert_array_equal(after.embedding, before.embedding)
    assert da.find(filter={"price": 1269}).ids == ["p2"]
    # the vector search still finds it where it was
    res = da.find(vector=before.embedding, limit=1)
    assert res.ids == ["p2"]


def test_update_vector_moves_the_document(make_da):
    da = make_da(Product)
    da.extend([product(i) for i in range(20)])
    target = np.arange(8, dtype=np.float32) + 1
    da.update("p7", embedding=target)
    assert da.find(vector=target, limit=1).ids == ["p7"]


def test_update_errors_leave_data_untouched(make_da):
    da = make_da(Product)
    da.extend([product(1)])
    with pytest.raises(KeyError):
        da.update("missing", price=1)
    with pytest.raises(hs.SchemaError, match="price"):
        da.update("p1", price="expensive")
    with pytest.raises(hs.SchemaError, match="embedding"):
        da.update("p1", embedding=[np.nan] * 8)
    with pytest.raises(hs.SchemaError):
        da.update("p1", colour="red")
    with pytest.raises(hs.SchemaError):
        da.update("p1", price=5, title=None)  # one bad value -> nothing written
    assert da["p1"].price == 1 and da.find(filter={"price": 1}).ids == ["p1"]


def test_delete_and_readd(make_da):
    da = make_da(Product)
    da.extend([product(i) for i in range(6)])
    del da["p1"]
    with pytest.raises(KeyError):
        del da["p1"]
    with pytest.raises(KeyError):
        da["p1"]
    assert da.delete(["p2", "p3", "p3", "nope"]) == 2
    assert [d.id for d in da] == ["p0", "p4", "p5"]
    assert set(da.find(vector=np.ones(8), limit=10).ids) == {"p0", "p4", "p5"}
    da.append(product(1))
    assert [d.id for d in da] == ["p0", "p4", "p5", "p1"]
    assert da.find(vector=product(1)["embedding"], limit=1).ids == ["p1"]


def test_mass_delete_keeps_order_and_search(make_da, rng):
    da = make_da(_vector_schema(4))
    X = rng.standard_normal((3000, 4)).astype(np.float32)
    da.extend([{"id": f"v{i}", "v": x, "group": i % 7} for i, x in enumerate(X)])
    keep = [i for i in range(3000) if i % 10 == 0]
    assert da.delete([f"v{i}" for i in range(3000) if i % 10]) == 3000 - len(keep)
    assert [d.id for d in da] == [f"v{i}" for i in keep]
    assert da.find(filter={"group": 3}, limit=None).ids == [f"v{i}" for i in keep if i % 7 == 3]
    q = rng.standard_normal(4)
    res = da.find(vector=q, limit=10, exact=True)
    check_topk(res.ids, res.scores, [f"v{i}" for i in keep], exact_scores(X[keep], q, "cosine"), 10)


def test_returned_documents_are_copies(make_da):
    da = make_da(Product)
    da.extend([product(1)])
    doc = da["p1"]
    doc.price = 999
    assert da["p1"].price == 1
    with pytest.raises(ValueError):
        doc.embedding[0] = 5.0  # stored vectors are read-only


def test_writes_are_visible_to_the_next_find(make_da):
    da = make_da(Product)
    for i in range(20):
        da.append(product(i))
        assert da.find(filter={"price": i}).ids == [f"p{i}"]
        assert da.find(vector=product(i)["embedding"], limit=1).ids == [f"p{i}"]


crud_ops = st.lists(st.tuples(st.sampled_from(["extend", "delete", "update", "set"]),
                              st.lists(st.integers(0, 15), min_size=1, max_size=6), st.integers(-50, 50)),
                    max_size=25)


@given(ops=crud_ops)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_crud_against_a_dict_model(empty_da, ops):
    da = empty_da(Product)
    model: dict = {}
    for op, keys, val in ops:
        if op == "extend":
            docs = [product(k, price=val) for k in keys]
            da.extend(docs)
            for d in docs:
                model[d["id"]] = d
        elif op == "delete":
            ids = [f"p{k}" for k in keys]
            assert da.delete(ids) == len({i for i in ids if i in model})
            for i in ids:
                model.pop(i, None)
        elif op == "update":
            i = f"p{keys[0]}"
            if i in model:
                da.update(i, price=val)
                model[i] = dict(model[i], price=val)
            else:
                with pytest.raises(KeyError):
                    da.update(i, price=val)
        else:
            i = f"p{keys[0]}"
            da[i] = product(keys[0], price=val)
            model[i] = product(keys[0], price=val)
    assert len(da) == len(model)
    assert [d.id for d in da] == list(model)
    assert [d.price for d in da] == [d["price"] for d in model.values()]
    flt = {"price": {"$gte": 0}}
    assert da.find(filter=flt, limit=None).ids == [i for i, d in model.items() if matches(d, flt)]


# ---------------------------------------------------------- vector search
def _vector_schema(d):
    class V(hs.Document):
        group: int = 0
        v: hs.Vector[d]
    return V


@pytest.mark.parametrize("d", [1, 3, 7, 97, 384])
@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_find_by_vector_matches_numpy(make_da, storage, d, metric, rng, request):
    """Exact storages: the exact top-k. Approximate ones: exact=True is exact, the
    default search finds (nearly) all of the true top-10 on this small set."""
    approx = storage not in EXACT_STORAGES
    if storage.removesuffix("-cluster") in ("elasticsearch", "opensearch") and metric == "cosine" and d == 1:
        # every 1-d vector normalises to +1 or -1: 300 exact duplicates of two points. Lucene's
        # neighbour-diversity rule drops duplicates as links, so its graph falls apart into
        # chains and the walk can stay on the wrong side (exact=True is still checked).
        request.applymarker(pytest.mark.xfail(reason="Lucene HNSW cannot link exact duplicates", strict=False))
    V = _vector_schema(d)
    da = make_da(V, metric=metric)
    X = rng.standard_normal((300, d)).astype(np.float32)
    ids = [f"v{i}" for i in range(len(X))]
    da.extend([{"id": i, "v": x, "group": n % 4} for n, (i, x) in enumerate(zip(ids, X))])
    found = wanted = 0
    for q in rng.standard_normal((4, d)).astype(np.float32):
        ref = exact_scores(X, q, metric)
        res = da.find(vector=q, limit=10, exact=approx)
        check_topk(res.ids, res.scores, ids, ref, 10)
        assert res.scores.dtype == np.float32
        assert [h.id for h in res] == res.ids and [d.id for d in res.docs] == res.ids
        # filtered: exact top-k among the matches
        res = da.find(vector=q, limit=10, filter={"group": 2}, exact=approx)
        sub = [n for n in range(len(X)) if n % 4 == 2]
        check_topk(res.ids, res.scores, [ids[n] for n in sub], exact_scores(X[sub], q, metric), 10)
        if approx:
            res = da.find(vector=q, limit=10)
            assert len(res) == 10
            # every score is the true similarity of the document it names
            np.testing.assert_allclose(res.scores, ref[[int(i[1:]) for i in res.ids]], rtol=1e-4, atol=1e-4)
            kth = np.sort(ref)[-10]  # ties at the boundary count as found
            found += int(np.count_nonzero(ref[[int(i[1:]) for i in res.ids]] >= kth - 1e-5))
            wanted += 10
    if approx:
        assert found / wanted >= 0.9, f"recall@10 {found / wanted:.2f} on 300 points"


@pytest.mark.parametrize("matching", [0, 1, 3, 10, 40])
def test_filtered_vector_search_returns_min_limit_matches(make_da, matching, rng):
    da = make_da(_vector_schema(4))
    da.extend([{"id": f"v{i}", "v": rng.standard_normal(4), "group": int(i < matching)} for i in range(200)])
    res = da.find(vector=np.ones(4), filter={"group": 1}, limit=10)
    assert len(res) == min(10, matching)
    assert all(i in {f"v{j}" for j in range(matching)} for i in res.ids)


def test_find_batched_equals_find(make_da, rng):
    da = make_da(_vector_schema(16))
    X = rng.standard_normal((500, 16))
    da.extend([{"id": f"v{i}", "v": x, "group": i % 3} for i, x in enumerate(X)])
    Q = rng.standard_normal((37, 16)).astype(np.float32)
    for flt in (None, {"group": 1}):
        many = da.find_batched(Q, limit=5, filter=flt)
        assert len(many) == 37
        for q, res in zip(Q, many):
            one = da.find(vector=q, limit=5, filter=flt)
            assert res.ids == one.ids
            np.testing.assert_allclose(res.scores, one.scores, rtol=1e-5)
    # offset and min_score cut each row's ranking as find's do
    cut = float(np.median(da.find(vector=Q[0], limit=20).scores))
    many = da.find_batched(Q, limit=4, offset=3, min_score=cut)
    for q, res in zip(Q, many):
        one = da.find(vector=q, limit=4, offset=3, min_score=cut)
        assert res.ids == one.ids and all(s >= cut for s in res.scores)
    with pytest.raises(hs.ConfigError):
        da.find_batched(Q, offset=-1)


def test_exact_flag_and_ef_are_accepted(make_da, rng):
    da = make_da(_vector_schema(4))
    da.extend([{"id": f"v{i}", "v": rng.standard_normal(4)} for i in range(50)])
    q = rng.standard_normal(4)
    assert da.find(vector=q, exact=True, limit=5).ids == da.find(vector=q, ef=200, limit=5).ids


def test_filter_only_results(make_da):
    da = make_da(Product)
    da.extend([product(i) for i in range(30)])
    res = da.find(filter={"category": "Toys"})
    assert res.ids == [f"p{i}" for i in range(1, 30, 3)][:10]
    assert len(da.find(filter={"category": "Toys"}, limit=None)) == 10
    assert da.find(filter={"category": "Toys"}, limit=2).ids == ["p1", "p4"]
    assert da.find(filter={"category": "Nope"}).ids == []
    assert len(da.find(limit=None)) == 30  # no filter: everything, insertion order


def test_sql_injection_shaped_keyword_is_just_a_string(make_da):
    da = make_da(Product)
    da.extend([product(0, category="x' OR 1=1 --"), product(1)])
    assert da.find(filter={"category": "x' OR 1=1 --"}).ids == ["p0"]


def test_vector_missing_from_some_documents(make_da):
    class Opt(hs.Document):
        v: Optional[hs.Vector[2]] = None

    da = make_da(Opt)
    da.extend([{"id": "a", "v": [1, 0]}, {"id": "b"}, {"id": "c", "v": [0, 1]}])
    res = da.find(vector=[1, 1], limit=10)
    assert sorted(res.ids) == ["a", "c"]
    assert da.find(filter={"v": {"$exists": False}}).ids == ["b"]


# ------------------------------------------------------------------ errors
def test_query_errors(make_da):
    da = make_da(Product)
    da.extend([product(0)])
    with pytest.raises(hs.SchemaError, match="8 dimensions"):
        da.find(vector=[1.0, 2.0])
    with pytest.raises(hs.SchemaError, match="NaN"):
        da.find(vector=[np.nan] * 8)
    with pytest.raises(hs.SchemaError):
        da.find_batched(np.ones((3, 7)))
    with pytest.raises(hs.ConfigError):
        da.find(vector=np.ones(8), limit=-1)
    with pytest.raises(hs.ConfigError):
        da.find(vector=np.ones(8), fusion="max")
    with pytest.raises(hs.ConfigError):
        da.find(text="nokia", candidates=0)
    if da.storage in ("hnswlib", "annlite"):  # these wrapped libraries have no inverted index
        with pytest.raises(hs.UnsupportedError, match="text search"):
            da.find(text="nokia 3310")
    else:
        assert da.find(text="nokia 3310").ids == []
    with pytest.raises(TypeError):
        da[3]


def test_unknown_storage_and_options():
    with pytest.raises(hs.ConfigError, match="valid storages"):
        hs.DocumentArray(Product, storage="postgres")
    with pytest.raises(hs.ConfigError, match="valid options"):
        hs.DocumentArray(Product, storage="memory", m=16)
    with pytest.raises(hs.ConfigError, match="metric"):
        hs.DocumentArray(Product, metric="hamming")
    with pytest.raises(hs.SchemaError):
        hs.DocumentArray(dict)
    assert "memory" in hs.backends()


def test_closed_array_refuses_use(make_da):
    da = make_da(Product)
    da.close()
    with pytest.raises(hs.ConfigError, match="closed"):
        len(da)
    with hs.DocumentArray(Product) as da2:
        da2.append(product(0))
    with pytest.raises(hs.ConfigError):
        da2.append(product(1))


def test_concurrent_readers_and_a_writer(make_da, rng):
    da = make_da(_vector_schema(32))
    da.extend([{"id": f"v{i}", "v": rng.standard_normal(32)} for i in range(2000)])
    errors = []
    stop = threading.Event()

    def reader():
        local = np.random.default_rng(threading.get_ident() % 1000)
        while not stop.is_set():
            try:
                res = da.find(vector=local.standard_normal(32), limit=5)
                assert len(res) == 5 and all(i is not None for i in res.ids)
                # documents are read when asked for: one deleted since the search reads as None
                for i, d in zip(res.ids, res.docs):
                    deleted_since = i.startswith("w") and int(i.rsplit("_", 1)[1]) % 8
                    assert (d is None and deleted_since) or (d is not None and d.id == i)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for r in range(12):  # grows the block and compacts tombstones while readers run
        da.extend([{"id": f"w{r}_{i}", "v": rng.standard_normal(32)} for i in range(800)])
        da.delete([f"w{r}_{i}" for i in range(800) if i % 8])
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert len(da) == 2000 + 12 * 100
