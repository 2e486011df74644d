"""Several named dense vector fields (API.md section 10, issue 30 item 1) on the storages that
hold them (memory, hnsw, sqlite, with and without files), against numpy brute force and the
N-list fusion model of tests/models.py (fusion_reference); and the refusal of every other
storage with a schema of several dense fields.

Public API only."""
import math
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import STORAGES, storage_fixture
from tests.contract.section10 import assert_fused
from tests.contract.test_lexical import best_fields
from tests.models import check_topk, clustered, exact_scores, fusion_reference

NAMED = ("memory", "memory-path", "hnsw", "hnsw-f32", "hnsw-path", "sqlite", "qdrant", "qdrant-path", "qdrant-client",
         "elasticsearch", "opensearch", "weaviate")
storage = storage_fixture(NAMED)
APPROXIMATE = {"hnsw", "hnsw-f32", "hnsw-path"}
METRICS = {"text_vec": "cosine", "image_vec": "ip", "third": "l2"}
DIMS = {"text_vec": 8, "image_vec": 5, "third": 3}
WORDS = "red green blue cable phone case usb charger".split()


class Page(hs.Document):
    title: hs.Text = ""
    description: hs.Text = ""
    tag: hs.Keyword = "a"
    price: int = 0
    text_vec: hs.Vector[8]
    image_vec: Optional[hs.Vector[5]] = None
    third: Optional[hs.Vector[3]] = None


def page_docs(rng, n, start=0):
    out = []
    for i in range(start, start + n):
        out.append({"id": f"p{i}", "title": " ".join(rng.choice(WORDS, rng.integers(1, 5))),
                    "tag": "abc"[i % 3], "price": i,
                    "text_vec": rng.standard_normal(8),
                    "image_vec": rng.standard_normal(5) if i % 3 else None,  # a third without it
                    "third": rng.standard_normal(3) if i % 4 else None})
    return out


def field_scores(docs: dict, field: str, q, allowed=None) -> dict:
    """id -> numpy score of every document holding `field` (and in `allowed`, None: all)."""
    ids = [i for i, d in docs.items() if getattr(d, field) is not None and (allowed is None or i in allowed)]
    if not ids:
        return {}
    X = np.array([getattr(docs[i], field) for i in ids])
    return dict(zip(ids, exact_scores(X, np.asarray(q, dtype=np.float32), METRICS[field]).tolist()))


@pytest.fixture
def da(make_da):
    return make_da(Page, metric=dict(METRICS))


# ------------------------------------------------------------------ one field at a time
@pytest.mark.parametrize("field", list(METRICS))
def test_each_field_searched_alone_equals_brute_force(da, storage, field):
    rng = np.random.default_rng(1)
    da.extend(page_docs(rng, 120))
    docs = {d.id: d for d in da}
    for flt in (None, {"tag": {"$in": ["a", "b"]}}):
        allowed = None if flt is None else {i for i, d in docs.items() if d.tag in ("a", "b")}
        for _ in range(4):
            q = rng.standard_normal(DIMS[field])
            ref = field_scores(docs, field, q, allowed)
            for exact in ((True, False) if storage not in APPROXIMATE else (True,)):
                res = da.find(vector={field: q}, limit=10, exact=exact, filter=flt)
                check_topk(res.ids, res.scores, list(ref), list(ref.values()), 10)
                assert set(res.part_scores) == {field}
                np.testing.assert_array_equal(res.part_scores[field], res.scores)
            # a document without the field is never a hit of its list, even when the limit asks for more
            every = da.find(vector={field: q}, limit=1000, exact=True, filter=flt)
            assert set(every.ids) == set(ref)


def test_ann_recall_of_each_field_on_hnsw(make_da, storage):
    if storage not in APPROXIMATE:
        pytest.skip("exact storages are checked for equality above")
    da = make_da(Page, metric=dict(METRICS))
    n = 1500
    rng = np.random.default_rng(2)
    X8, X5, X3 = clustered(n, 8, 40, rng=rng), clustered(n, 5, 40, rng=rng), clustered(n, 3, 40, rng=rng)
    da.extend([{"id": f"p{i}", "text_vec": X8[i], "image_vec": X5[i] if i % 3 else None,
                "third": X3[i] if i % 4 else None} for i in range(n)])
    docs = {d.id: d for d in da}
    for field, X in (("text_vec", X8), ("image_vec", X5), ("third", X3)):
        hit = total = 0
        for _ in range(20):
            q = X[rng.integers(n)] + 0.1 * rng.standard_normal(X.shape[1]).astype(np.float32)
            ref = field_scores(docs, field, q)
            want = set(sorted(ref, key=lambda i: -ref[i])[:10])
            got = da.find(vector={field: q}, limit=10)
            assert set(got.ids) <= set(ref)  # never a document without the field
            hit += len(want & set(got.ids))
            total += 10
        assert hit / total >= 0.9, (field, hit / total)


def test_batched_dict_of_one_field_equals_find_per_row(da, storage):
    rng = np.random.default_rng(3)
    da.extend(page_docs(rng, 80))
    Q = rng.standard_normal((6, 5))
    many = da.find_batched(vectors={"image_vec": Q}, limit=7, exact=True, filter={"price": {"$gte": 10}})
    for q, res in zip(Q, many):
        one = da.find(vector={"image_vec": q}, limit=7, exact=True, filter={"price": {"$gte": 10}})
        assert res.ids == one.ids
        np.testing.assert_allclose(res.scores, one.scores, rtol=1e-6)
    with pytest.raises(hs.UnsupportedError, match="one vector field per call"):
        da.find_batched(vectors={"image_vec": Q, "third": rng.standard_normal((6, 3))})
    with pytest.raises(hs.ConfigError, match="several vector fields"):
        da.find_batched(Q)


# ------------------------------------------------------------------ fusion of N lists
def model_lists(docs, text, qs, exact, fusion, allowed=None):
    """The (name, scores, every, missing) lists of tests/models.fusion_reference for a find."""
    out = []
    if text is not None:
        bm = best_fields(docs, text)
        bm = {i: s for i, s in bm.items() if allowed is None or i in allowed}
        out.append(("text", bm, exact and fusion != "rrf", 0.0))
    for field, q in qs.items():
        out.append((field, field_scores(docs, field, q, allowed), False, math.nan))
    return out


@pytest.mark.parametrize("fusion", ["rrf", "sum", "linear"])
@pytest.mark.parametrize("with_text", [True, False])
def test_fusion_of_several_lists_matches_the_model(da, storage, fusion, with_text):
    rng = np.random.default_rng(4)
    da.extend(page_docs(rng, 150))
    docs = {d.id: d for d in da}
    order = list(docs)
    for trial in range(5):
        text = " ".join(rng.choice(WORDS, 2)) if with_text else None
        fields = ["text_vec", "image_vec", "third"] if trial % 2 else ["image_vec", "third"]
        qs = {f: rng.standard_normal(DIMS[f]) for f in fields}
        c = [5, 20, 100][trial % 3]
        weights = None
        if fusion == "linear" and trial % 2:
            weights = {k: w for k, w in {"text": 0.2, "image_vec": 0.5, "third": 0.3, "text_vec": 1.0}.items()
                       if k in fields or (k == "text" and text is not None)}  # the lists of this find
        flt = {"price": {"$lt": 120}} if trial >= 3 else None
        allowed = None if flt is None else {i for i, d in docs.items() if d.price < 120}
        for exact in ((True, False) if storage not in APPROXIMATE else (True,)):
            res = da.find(text=text, vector=qs, fusion=fusion, candidates=c, limit=10, exact=exact,
                          weights=weights, filter=flt)
            # memory and sqlite search exactly whatever exact says; the lexical side of exact=True
            # "sum"/"linear" is every match (first edition)
            fused, parts = fusion_reference(order, model_lists(docs, text, qs, exact, fusion, allowed), fusion,
                                            candidates=c, weights=weights)
            assert_fused(res, fused, parts, 10)
            assert all(i in allowed for i in res.ids) if allowed is not None else True


def test_fusion_default_weights_are_equal_and_unknown_keys_refused(da):
    rng = np.random.default_rng(5)
    da.extend(page_docs(rng, 60))
    qs = {"text_vec": rng.standard_normal(8), "image_vec": rng.standard_normal(5)}
    a = da.find(vector=qs, fusion="linear", limit=20, exact=True)
    b = da.find(vector=qs, fusion="linear", weights={"text_vec": 0.5, "image_vec": 0.5}, limit=20, exact=True)
    assert a.ids == b.ids and np.allclose(a.scores, b.scores)
    with pytest.raises(hs.ConfigError, match="weights"):
        da.find(vector=qs, fusion="linear", weights={"colour": 1.0})
    with pytest.raises(hs.ConfigError, match="weights"):
        da.find(vector=qs, fusion="linear", weights={"text_vec": 0.0, "image_vec": 0.0})
    # a weight for a list this find does not run would be lost (and the list it means weigh 0)
    for lost in ({"text_vec": 1.0, "third": 1.0}, {"text": 0.5, "text_vec": 0.5, "image_vec": 0.5},
                 {"vector": 1.0, "image_vec": 0.5}):
        with pytest.raises(hs.ConfigError, match='naming lists of the find \\("text_vec", "image_vec"\\)'):
            da.find(vector=qs, fusion="linear", weights=lost)


def test_offset_and_min_score_cut_the_fused_ranking(da):
    rng = np.random.default_rng(6)
    da.extend(page_docs(rng, 100))
    qs = {"text_vec": rng.standard_normal(8), "third": rng.standard_normal(3)}
    full = da.find(text="red cable", vector=qs, fusion="rrf", limit=30, exact=True)
    page = da.find(text="red cable", vector=qs, fusion="rrf", limit=10, offset=10, exact=True)
    assert page.ids == full.ids[10:20]
    cut = float(full.scores[7])
    kept = da.find(text="red cable", vector=qs, fusion="rrf", limit=30, exact=True, min_score=cut)
    assert kept.ids == [i for i, s in zip(full.ids, full.scores) if s >= cut]
    alone = da.find(vector={"third": qs["third"]}, limit=30, exact=True)
    above = da.find(vector={"third": qs["third"]}, limit=30, exact=True, min_score=float(alone.scores[4]))
    assert above.ids == alone.ids[:len(above)] and len(above) >= 5


# ------------------------------------------------------------------ writes
def test_partial_update_of_one_field_leaves_the_others(da, storage):
    rng = np.random.default_rng(7)
    da.extend(page_docs(rng, 40))
    before = da["p1"]
    new = np.array([3.0, 0, 0, 0, 0])
    da.update("p1", image_vec=new)
    after = da["p1"]
    np.testing.assert_array_equal(after.image_vec, new.astype(np.float32))
    np.testing.assert_array_equal(after.text_vec, before.text_vec)
    np.testing.assert_array_equal(after.third, before.third)
    assert da.find(vector={"image_vec": [1, 0, 0, 0, 0]}, limit=1, exact=True).ids == ["p1"]
    # its text_vec neighbourhood is unchanged
    got = da.find(vector={"text_vec": before.text_vec}, limit=1, exact=True)
    assert got.ids == ["p1"] and got.scores[0] == pytest.approx(1.0, abs=1e-5)
    da.update("p1", image_vec=None)
    assert "p1" not in da.find(vector={"image_vec": [1, 0, 0, 0, 0]}, limit=1000, exact=True).ids
    assert "p1" not in da.find(vector={"image_vec": [1, 0, 0, 0, 0]}, limit=1000).ids
    assert "p1" in da.find(vector={"text_vec": before.text_vec}, limit=1000, exact=True).ids
    with pytest.raises(hs.SchemaError):
        da.update("p1", third=[1.0, 2.0])  # wrong dimension for that field: nothing changes
    np.testing.assert_array_equal(da["p1"].third, before.third)


def test_writes_by_condition_on_a_vector_field(da, storage):
    rng = np.random.default_rng(8)
    da.extend(page_docs(rng, 60))
    v = np.array([0.0, 0, 5])
    assert da.update_many({"tag": "a"}, third=v) == 20
    docs = {d.id: d for d in da}
    res = da.find(vector={"third": v}, limit=20, exact=True)
    assert set(res.ids) == {i for i, d in docs.items() if d.tag == "a"}
    assert np.allclose(res.scores, 0.0, atol=1e-5)  # l2: minus the distance, 0 for the same vector
    for hnsw_exact in (True, False):
        assert set(da.find(vector={"third": v}, limit=20, exact=hnsw_exact).ids) <= set(res.ids) | set(docs)
    assert da.delete(filter={"tag": "a"}) == 20
    left = da.find(vector={"third": v}, limit=1000, exact=True)
    assert not any(docs[i].tag == "a" for i in left.ids)
    assert set(left.ids) == {i for i, d in docs.items() if d.tag != "a" and d.third is not None}


# ------------------------------------------------------------------ columns and frames
def test_columns_round_trip_carries_every_vector_field(da, make_da):
    rng = np.random.default_rng(9)
    da.extend(page_docs(rng, 30))
    cols = da.to_columns()
    assert cols["text_vec"].shape == (30, 8) and cols["text_vec"].dtype == np.float32
    assert cols["image_vec"].dtype == object and cols["image_vec"][0] is None
    assert cols["image_vec"][1].shape == (5,)
    other = make_da(Page, metric=dict(METRICS))
    other.extend_columns(cols)
    for a, b in zip(da, other):
        assert a.id == b.id
        for f in METRICS:
            va, vb = getattr(a, f), getattr(b, f)
            assert (va is None) == (vb is None) and (va is None or np.array_equal(va, vb))
    q = rng.standard_normal(5)
    assert other.find(vector={"image_vec": q}, limit=5, exact=True).ids == \
        da.find(vector={"image_vec": q}, limit=5, exact=True).ids
    table = da.to_arrow(["id", "text_vec", "image_vec"])
    assert table.column("image_vec").null_count == 10
    frame = da.to_pandas(["id", "third"])
    assert frame["third"].isna().sum() == 8


# ------------------------------------------------------------------ durability
PERSISTENT = {"memory-path": "memory", "hnsw-path": "hnsw", "sqlite": "sqlite", "qdrant-path": "qdrant"}


def reopen(storage, tmp_path, metric, name="re"):
    kind = PERSISTENT[storage]
    path = tmp_path / (f"{name}.db" if kind == "sqlite" else name)
    return hs.DocumentArray(Page, storage=kind, path=path, metric=metric)


@pytest.mark.parametrize("snapshot", [False, True])
def test_every_field_survives_close_and_reopen(storage, tmp_path, snapshot):
    if storage not in PERSISTENT:
        pytest.skip("no files")
    rng = np.random.default_rng(10)
    da = reopen(storage, tmp_path, dict(METRICS))
    da.extend(page_docs(rng, 50))
    da.update("p2", image_vec=[1.0, 2, 3, 4, 5])
    da.update_many({"tag": "b"}, third=None)
    del da["p4"]
    want = {d.id: d for d in da}
    qs = {f: rng.standard_normal(DIMS[f]) for f in METRICS}
    found = {f: da.find(vector={f: q}, limit=8, exact=True) for f, q in qs.items()}
    if snapshot:
        da.close()  # close writes a snapshot of what the log holds; reopen, write, close again
        da = reopen(storage, tmp_path, dict(METRICS))
        da.extend(page_docs(rng, 0))
    da.close()
    again = reopen(storage, tmp_path, dict(METRICS))
    got = {d.id: d for d in again}
    assert list(got) == list(want)
    for i, d in want.items():
        for f in METRICS:
            a, b = getattr(d, f), getattr(got[i], f)
            assert (a is None) == (b is None) and (a is None or np.array_equal(a, b)), (i, f)
    for f, q in qs.items():
        res = again.find(vector={f: q}, limit=8, exact=True)
        assert res.ids == found[f].ids
        np.testing.assert_allclose(res.scores, found[f].scores, rtol=1e-5, atol=1e-6)
        approx = again.find(vector={f: q}, limit=8)
        assert set(approx.ids) <= {i for i, d in got.items() if getattr(d, f) is not None}
    again.close()


def test_reopening_with_another_metric_for_one_field(storage, tmp_path):
    """Each field's metric is recorded with the files: the hnsw graph of a field built for one
    metric is refused under another (BackendError naming the field); memory and sqlite score with
    the metric asked for (the memory storage's snapshot kept the old metric's row norms: cosine
    scores above 1)."""
    if storage not in PERSISTENT:
        pytest.skip("no files")
    rng = np.random.default_rng(11)
    da = reopen(storage, tmp_path, {"text_vec": "l2", "image_vec": "ip", "third": "l2"})
    da.extend(page_docs(rng, 40))
    da.close()
    changed = {"text_vec": "cosine", "image_vec": "ip", "third": "l2"}
    if PERSISTENT[storage] == "hnsw":
        with pytest.raises(hs.BackendError, match="text_vec.*metric='l2'"):
            reopen(storage, tmp_path, changed)
        return
    if PERSISTENT[storage] == "qdrant":  # a shard's vector configs are fixed when it is made
        with pytest.raises(hs.ConfigError, match="made for another schema or metric"):
            reopen(storage, tmp_path, changed)
        return
    again = reopen(storage, tmp_path, changed)
    docs = {d.id: d for d in again}
    q = rng.standard_normal(8)
    ref = field_scores(docs, "text_vec", q)
    res = again.find(vector={"text_vec": q}, limit=10, exact=True)
    check_topk(res.ids, res.scores, list(ref), list(ref.values()), 10)
    again.close()


class OneVec(hs.Document):
    title: hs.Text = ""
    embedding: hs.Vector[4]


@pytest.mark.parametrize("kind", ["memory", "hnsw"])
def test_a_one_field_collection_reopened_with_another_metric(tmp_path, kind):
    """The one-field case as before for hnsw (BackendError); the memory storage now scores with the
    metric asked for instead of the snapshot's stale row norms."""
    rng = np.random.default_rng(12)
    X = rng.random((20, 4)).astype(np.float32) + 0.1
    with hs.DocumentArray(OneVec, storage=kind, path=tmp_path / "c", metric="l2") as da:
        da.extend([{"id": str(i), "embedding": X[i]} for i in range(20)])
    if kind == "hnsw":
        with pytest.raises(hs.BackendError, match="metric='l2'"):
            hs.DocumentArray(OneVec, storage=kind, path=tmp_path / "c", metric="cosine")
        return
    with hs.DocumentArray(OneVec, storage=kind, path=tmp_path / "c", metric="cosine") as da:
        q = np.ones(4)
        res = da.find(vector=q, limit=5)
        ref = exact_scores(X, q.astype(np.float32), "cosine")
        check_topk(res.ids, res.scores, [str(i) for i in range(20)], ref, 5)


# ------------------------------------------------------------------ errors
def test_query_and_option_errors_name_the_vector_fields(da):
    da.extend(page_docs(np.random.default_rng(13), 10))
    with pytest.raises(hs.ConfigError, match="text_vec, image_vec, third"):
        da.find(vector=np.ones(8))
    with pytest.raises(hs.ConfigError, match="'colour' is not a vector field.*text_vec, image_vec, third"):
        da.find(vector={"colour": np.ones(8)})
    with pytest.raises(hs.ConfigError, match="'title' is not a vector field"):
        da.find(vector={"title": np.ones(8)})
    with pytest.raises(hs.ConfigError, match="empty dict"):
        da.find(vector={})
    with pytest.raises(hs.SchemaError, match="image_vec"):
        da.find(vector={"image_vec": np.ones(8)})  # that field has 5 dimensions
    with pytest.raises(hs.SchemaError):
        da.find(vector={"image_vec": [np.nan] * 5})
    with pytest.raises(hs.ConfigError, match="sort"):
        da.find(vector={"image_vec": np.ones(5)}, sort=[("price", "asc")])


@pytest.mark.parametrize("metric", [{"colour": "ip"}, {"text_vec": "hamming"}, {"text_vec": 1}, "dot"])
def test_bad_metric_options_are_config_errors(metric, tmp_path):
    for kind in ("memory", "hnsw", "sqlite"):
        opts = {"path": tmp_path / "m.db"} if kind == "sqlite" else {}
        with pytest.raises(hs.ConfigError, match="metric"):
            hs.DocumentArray(Page, storage=kind, metric=metric, **opts)


def test_a_metric_dict_leaves_unnamed_fields_cosine():
    da = hs.DocumentArray(Page, storage="memory", metric={"third": "ip"})
    rng = np.random.default_rng(14)
    da.extend(page_docs(rng, 30))
    docs = {d.id: d for d in da}
    q = rng.standard_normal(8)
    res = da.find(vector={"text_vec": q}, limit=5)
    ids = list(docs)
    X = np.array([docs[i].text_vec for i in ids])
    check_topk(res.ids, res.scores, ids, exact_scores(X, q.astype(np.float32), "cosine"), 5)
    assert res.scores.max() <= 1.0 + 1e-6


ONE_FIELD_STORAGES = [s for s in ("hnswlib",) if s in STORAGES]


@pytest.mark.parametrize("kind", ONE_FIELD_STORAGES)
def test_storages_holding_one_dense_field_refuse_several_and_take_the_dict_form(kind, tmp_path):
    opts = {"url": ":memory:"} if kind == "qdrant-client" else {}
    name = "qdrant" if kind.startswith("qdrant") else kind
    with pytest.raises(hs.UnsupportedError, match=f"storage '{name}' holds one dense vector field"):
        hs.DocumentArray(Page, storage=name, **opts)
    da = hs.DocumentArray(OneVec, storage=name, metric={"embedding": "ip"}, **opts)
    rng = np.random.default_rng(15)
    X = rng.standard_normal((30, 4)).astype(np.float32)
    da.extend([{"id": str(i), "embedding": X[i]} for i in range(30)])
    q = rng.standard_normal(4)
    res = da.find(vector={"embedding": q}, limit=5, exact=True)
    check_topk(res.ids, res.scores, [str(i) for i in range(30)], exact_scores(X, q.astype(np.float32), "ip"), 5)
    assert list(res.part_scores) == ["embedding"]
    assert res.ids == da.find(vector=q, limit=5, exact=True).ids
    batched = da.find_batched({"embedding": q.reshape(1, -1)}, limit=5, exact=True)[0]
    assert batched.ids == res.ids
    with pytest.raises(hs.ConfigError, match="metric"):
        hs.DocumentArray(OneVec, storage=name, metric={"other": "ip"}, **opts)
    da.close()
