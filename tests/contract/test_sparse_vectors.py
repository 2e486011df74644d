"""hs.SparseVector fields (API.md section 10, issue 30 item 2): the value rules at the schema
(SchemaError naming the field and the entry at fault), the dict read-back, the JSON round trip;
search on the storages holding them against a dict model of the dot product and the N-list
fusion model (tests/models.py fusion_reference); writes, columns; and the refusal of every
storage that does not hold sparse vectors.

Public API only."""
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.section10 import (PERSISTENT, REFUSING, assert_refused_at_open,
                                     assert_fused, assert_remote_storages_refuse, assert_topk_of, replay,
                                     write_ops)
from tests.contract.test_lexical import best_fields
from tests.models import exact_scores, fusion_reference

# the storages holding sparse fields (memory-path, hnsw and sqlite join when they carry them)
WIRED = ("memory", "memory-path", "hnsw", "hnsw-path", "sqlite", "qdrant", "qdrant-path", "qdrant-client",
         "elasticsearch", "opensearch")
storage = storage_fixture(WIRED)
WORDS = "red green blue cable phone case usb charger".split()


class Sparse(hs.Document):
    title: hs.Text = ""
    tag: hs.Keyword = "a"
    splade: hs.SparseVector = {}


def model_dict(value: dict) -> dict:
    """The reference read-back of a valid dict: int keys ascending, zeros dropped, float32 weights."""
    return {int(k): float(np.float32(v)) for k, v in sorted(value.items()) if v != 0}


@pytest.mark.parametrize("value", [
    {3: 1.5, 1: 0.25, 2_147_483_647: 2.0},
    {7: 0.0, 5: 1e-3, 0: 3},            # a zero is dropped, an int weight becomes a float
    {np.int64(9): np.float32(0.5)},     # numpy scalars
    {},
])
def test_a_dict_is_read_back_as_a_sorted_dict_of_int_to_float(value):
    doc = Sparse(splade=value)
    assert doc.splade == model_dict(value)
    assert list(doc.splade) == sorted(doc.splade)
    assert all(type(k) is int and type(v) is float for k, v in doc.splade.items())


def test_an_indices_values_pair_equals_the_dict_form():
    rng = np.random.default_rng(3)
    keys = rng.choice(10_000, 50, replace=False)
    weights = rng.random(50) + 0.1
    want = model_dict(dict(zip(keys.tolist(), weights.tolist())))
    assert Sparse(splade=(keys, weights.astype(np.float32))).splade == want
    assert Sparse(splade=(keys.tolist(), weights.tolist())).splade == want
    assert Sparse(splade=[keys.tolist(), weights.tolist()]).splade == want


def test_the_default_is_an_empty_dict_of_its_own():
    a, b = Sparse(), Sparse()
    assert a.splade == {} and b.splade == {}
    a.splade[1] = 2.0
    assert b.splade == {} and Sparse().splade == {}


def test_json_round_trip_keeps_int_keys():
    doc = Sparse(id="x", splade={10: 0.5, 2: 1.25})
    raw = doc.model_dump_json()
    json.loads(raw)  # valid JSON
    back = Sparse.model_validate_json(raw)
    assert back.splade == doc.splade and all(type(k) is int for k in back.splade)


def test_the_input_is_not_shared():
    d = {1: 1.0}
    doc = Sparse(splade=d)
    d[2] = 5.0
    assert doc.splade == {1: 1.0}


@pytest.mark.parametrize("value, match", [
    ({"a": 1.0}, "key 'a' is not an int"),
    ({1.5: 1.0}, "not an int"),
    ({True: 1.0}, "not an int"),
    ({-1: 1.0}, "outside"),
    ({2**31: 1.0}, "outside"),
    ({1: float("nan")}, "finite"),
    ({1: float("inf")}, "finite"),
    ({1: -0.5}, ">= 0"),
    ({1: "x"}, "not a number"),
    ({1: 1e39}, "float32"),
    (([1, 1], [1.0, 2.0]), "twice"),
    (([1, 2], [1.0]), "one length"),
    (([1.5], [1.0]), "ints"),
    ((np.arange(65_537), np.ones(65_537)), "at most 65536"),
    ([1, 2, 3], "expected a dict"),
    ("1:2", "expected a dict"),
    (np.ones(4), "expected a dict"),
])
def test_bad_values_are_schema_errors_naming_the_field(value, match):
    with pytest.raises(hs.SchemaError, match=match) as e:
        Sparse(splade=value)
    assert "Sparse.splade" in str(e.value)


def test_a_dimension_is_a_schema_error():
    """hs.SparseVector[30522] would otherwise be dict's generic alias: a field that silently holds
    no sparse vector."""
    with pytest.raises(hs.SchemaError, match="takes no dimension"):
        hs.SparseVector[30522]


def test_the_entry_limit_counts_nonzero_entries_only():
    n = 65_536
    assert len(Sparse(splade=(np.arange(n + 10), np.r_[np.ones(n), np.zeros(10)])).splade) == n


# ------------------------------------------------------------------ durability
sparse_values = st.dictionaries(st.integers(0, 12), st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0]), max_size=5)


def open_at(storage, path, **opts):
    kind, name = PERSISTENT[storage]
    return hs.DocumentArray(Page, storage=kind, path=path / name, metric="ip", **opts)


def assert_same_as_model(da, model: dict):
    docs = {d.id: d for d in da}
    assert {i: d.splade for i, d in docs.items()} == {i: m["splade"] for i, m in model.items()}
    for q in ({1: 1.0, 2: 0.5}, {0: 1.0, 5: 2.0, 9: 1.0, 12: 0.5}):
        assert_topk_of(da.find(vector={"splade": q}, limit=5), dot_model(docs, q), 5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=write_ops(sparse_values))
def test_every_write_survives_close_and_reopen(storage, tmp_path_factory, ops):
    if storage not in PERSISTENT:
        pytest.skip("no files")
    replay(storage, tmp_path_factory.mktemp("sparse"), ops, open_at, "splade", value_of=lambda v: v,
           scaled=lambda v, i: {k: w * (1 + i % 2) for k, w in v.items()}, model_of=model_dict,
           check=assert_same_as_model)


@pytest.mark.parametrize("kind", REFUSING)
def test_storages_without_sparse_vectors_refuse_the_schema_at_open(kind, tmp_path):
    assert_refused_at_open(Sparse, "hs.SparseVector", "splade", kind, tmp_path)


def test_remote_storages_refuse_sparse_vectors_before_connecting():
    """The refusal comes at open, from the storage's description, not from a node (none runs)."""
    assert_remote_storages_refuse(Sparse, "hs.SparseVector")


# ------------------------------------------------------------------ search on the storages holding them
class Page(hs.Document):
    title: hs.Text = ""
    description: hs.Text = ""  # best_fields, the lexical model, reads both text fields
    tag: hs.Keyword = "a"
    price: int = 0
    emb: hs.Vector[4]
    splade: hs.SparseVector = {}


def sparse_docs(rng, n, start=0, vocab=40):
    """Pages whose sparse vectors share keys often, with weights from a few values (ties);
    every fifth has none."""
    out = []
    for i in range(start, start + n):
        keys = rng.choice(vocab, int(rng.integers(1, 8)), replace=False).tolist()
        splade = {} if i % 5 == 0 else {k: float(rng.choice([0.5, 1.0, 1.5, 2.25])) for k in keys}
        out.append({"id": f"p{i}", "title": " ".join(rng.choice(WORDS, rng.integers(1, 4))),
                    "tag": "abc"[i % 3], "price": i, "emb": rng.standard_normal(4), "splade": splade})
    return out


def dot_model(docs: dict, q: dict, allowed=None) -> dict:
    """id -> sum over shared keys of query weight x document weight, for every document sharing
    a key with the query (and in `allowed`, None: all): the matches of the sparse list."""
    q32 = {k: float(np.float32(v)) for k, v in q.items() if v}
    out = {}
    for i, d in docs.items():
        shared = set(q32) & set(d.splade)
        if shared and (allowed is None or i in allowed):
            out[i] = sum(q32[k] * d.splade[k] for k in shared)
    return out


def random_query(rng, vocab=40):
    keys = rng.choice(vocab, int(rng.integers(1, 6)), replace=False).tolist()
    return {k: float(rng.choice([0.5, 1.0, 2.0])) for k in keys}


@pytest.fixture
def da(make_da):
    return make_da(Page, metric="ip")


def test_sparse_top_k_equals_the_dot_product_model(da):
    rng = np.random.default_rng(11)
    da.extend(sparse_docs(rng, 300))
    docs = {d.id: d for d in da}
    for _ in range(20):
        q = random_query(rng)
        for k in (1, 10, 400):
            res = da.find(vector={"splade": q}, limit=k)
            assert_topk_of(res, dot_model(docs, q), k)
            assert list(res.part_scores) == ["splade"]
    # an (indices, values) query is the same query
    q = random_query(rng)
    pair = (np.array(list(q)), np.array(list(q.values())))
    assert da.find(vector={"splade": pair}, limit=10).ids == da.find(vector={"splade": q}, limit=10).ids
    # a query sharing no key with any document, and an empty one, have no hits
    assert len(da.find(vector={"splade": {10_000: 1.0}}, limit=10)) == 0
    assert len(da.find(vector={"splade": {}}, limit=10)) == 0


def test_ties_go_to_insertion_order(da):
    da.extend([{"id": f"t{i}", "emb": [1, 0, 0, 0], "splade": {3: 1.0, 9: 2.0}} for i in range(12)])
    res = da.find(vector={"splade": {3: 1.0}}, limit=5)
    assert res.ids == [f"t{i}" for i in range(5)] and np.allclose(res.scores, 1.0)


def test_filters_are_pre_filters(da):
    rng = np.random.default_rng(12)
    da.extend(sparse_docs(rng, 200))
    docs = {d.id: d for d in da}
    for flt, pred in (({"tag": "b"}, lambda d: d.tag == "b"),
                      ({"price": {"$gte": 150}}, lambda d: d.price >= 150),
                      ({"id": {"$in": ["p3", "p7", "p11"]}}, lambda d: d.id in ("p3", "p7", "p11"))):
        allowed = {i for i, d in docs.items() if pred(d)}
        for _ in range(5):
            q = random_query(rng)
            res = da.find(vector={"splade": q}, filter=flt, limit=10)
            assert_topk_of(res, dot_model(docs, q, allowed), 10)
            assert set(res.ids) <= allowed


def test_an_empty_sparse_vector_is_absent_for_exists_filters(da):
    da.extend(sparse_docs(np.random.default_rng(21), 40))
    docs = {d.id: d for d in da}
    da.update("p1", splade={})
    docs["p1"] = da["p1"]
    holding = [i for i, d in docs.items() if d.splade]
    assert da.find(filter={"splade": {"$exists": True}}, limit=None).ids == holding
    assert da.count({"splade": {"$exists": False}}) == len(docs) - len(holding)
    q = {1: 1.0, 2: 1.0}
    res = da.find(vector={"splade": q}, filter={"splade": {"$exists": True}}, limit=5)
    assert_topk_of(res, dot_model(docs, q), 5)

def test_offset_and_min_score(da):
    rng = np.random.default_rng(13)
    da.extend(sparse_docs(rng, 150))
    q = {1: 1.0, 2: 1.0, 3: 0.5, 4: 2.0}
    full = da.find(vector={"splade": q}, limit=30)
    assert da.find(vector={"splade": q}, limit=10, offset=10).ids == full.ids[10:20]
    cut = float(full.scores[6])
    assert da.find(vector={"splade": q}, limit=30, min_score=cut).ids == [i for i, s in zip(full.ids, full.scores)
                                                                          if s >= cut]


def test_batched_equals_find_per_query(da):
    rng = np.random.default_rng(14)
    da.extend(sparse_docs(rng, 200))
    qs = [random_query(rng) for _ in range(20)]
    batched = da.find_batched({"splade": qs}, limit=7, filter={"tag": {"$ne": "c"}})
    assert len(batched) == len(qs)
    for q, res in zip(qs, batched):
        one = da.find(vector={"splade": q}, limit=7, filter={"tag": {"$ne": "c"}})
        assert res.ids == one.ids and np.array_equal(res.scores, one.scores)
    assert da.find_batched({"splade": []}, limit=3) == []


def fused_model(docs, text, qs, fusion, candidates, weights, allowed=None):
    """fusion_reference over the text, sparse and dense lists of a find, its sparse parts made
    0 where a candidate holds the field but shares no key (NaN only where it holds none)."""
    lists = []
    if text is not None:
        bm = {i: s for i, s in best_fields(docs, text).items() if allowed is None or i in allowed}
        lists.append(("text", bm, False, 0.0))
    for field, q in qs.items():
        if field == "splade":
            lists.append((field, dot_model(docs, q, allowed), False, math.nan))
        else:
            ids = [i for i in docs if allowed is None or i in allowed]
            X = np.array([docs[i].emb for i in ids])
            lists.append((field, dict(zip(ids, exact_scores(X, np.float32(q), "ip").tolist())), False, math.nan))
    fused, parts = fusion_reference(list(docs), lists, fusion, candidates=candidates, weights=weights)
    if fusion != "rrf" and "splade" in parts:
        parts["splade"] = {i: (0.0 if math.isnan(v) and docs[i].splade else v) for i, v in parts["splade"].items()}
    return fused, parts


@pytest.mark.parametrize("fusion", ["rrf", "sum", "linear"])
def test_fusion_with_text_and_a_dense_field_matches_the_model(da, fusion):
    rng = np.random.default_rng(15)
    da.extend(sparse_docs(rng, 150))
    docs = {d.id: d for d in da}
    for trial in range(6):
        text = " ".join(rng.choice(WORDS, 2)) if trial % 3 else None
        qs = {"splade": random_query(rng)}
        if trial % 2:
            qs["emb"] = rng.standard_normal(4)
        if text is None and len(qs) == 1:
            qs["emb"] = rng.standard_normal(4)
        c = [5, 30, 100][trial % 3]
        weights = None
        if fusion == "linear" and trial >= 3:
            weights = {k: w for k, w in {"text": 0.3, "splade": 0.5, "emb": 0.2}.items()
                       if k in qs or (k == "text" and text is not None)}  # the lists of this find, no others
        flt = {"price": {"$lt": 110}} if trial >= 4 else None
        allowed = None if flt is None else {i for i, d in docs.items() if d.price < 110}
        res = da.find(text=text, vector=qs, fusion=fusion, candidates=c, limit=10, weights=weights, filter=flt)
        labels = (["text"] if text is not None else []) + list(qs)
        w = None if weights is None else {k: v for k, v in weights.items() if k in labels}
        fused, parts = fused_model(docs, text, qs, fusion, c, w, allowed)
        assert_fused(res, fused, parts, 10)


def test_updates_deletes_and_writes_by_condition(da):
    rng = np.random.default_rng(16)
    da.extend(sparse_docs(rng, 120))
    q = {1: 1.0, 5: 2.0, 7: 0.5}
    da.update("p3", splade={1: 4.0, 5: 4.0})
    assert da["p3"].splade == {1: 4.0, 5: 4.0}
    assert da.find(vector={"splade": q}, limit=1).ids == ["p3"]
    da.update("p3", splade={})  # absent: never a hit
    assert da["p3"].splade == {} and "p3" not in da.find(vector={"splade": q}, limit=200).ids
    del da["p4"]
    assert "p4" not in da.find(vector={"splade": q}, limit=200).ids
    assert da.update_many({"tag": "b"}, splade={7: 3.0}) == sum(1 for d in da if d.tag == "b")
    assert da.delete(filter={"price": {"$lt": 30}}) > 0
    docs = {d.id: d for d in da}
    assert all(d.splade == {7: 3.0} for d in docs.values() if d.tag == "b")
    for _ in range(10):
        qq = random_query(rng)
        assert_topk_of(da.find(vector={"splade": qq}, limit=10), dot_model(docs, qq), 10)
    with pytest.raises(hs.SchemaError, match="splade"):
        da.update("p50", splade={1: float("nan")})
    assert da["p50"].splade == docs["p50"].splade


def test_many_writes_and_deletes_keep_the_index_in_step(da):
    """Enough deletes to compact the rows: the index follows the renumbered rows."""
    rng = np.random.default_rng(17)
    model = {}
    for round_ in range(4):
        batch = sparse_docs(rng, 700, start=round_ * 700)
        da.extend(batch)
        for d in batch:
            model[d["id"]] = d
        gone = [i for n, i in enumerate(list(model)) if n % 3 != 2]
        da.delete(gone)
        for i in gone:
            model.pop(i)
    docs = {d.id: d for d in da}
    assert set(docs) == set(model)
    for _ in range(10):
        q = random_query(rng)
        assert_topk_of(da.find(vector={"splade": q}, limit=10), dot_model(docs, q), 10)


def test_columns_round_trip(da, make_da):
    rng = np.random.default_rng(18)
    da.extend(sparse_docs(rng, 40))
    cols = da.to_columns()
    assert isinstance(cols["splade"], list) and all(isinstance(v, dict) for v in cols["splade"])
    other = make_da(Page, metric="ip")
    other.extend_columns(cols)
    assert [d.splade for d in other] == [d.splade for d in da]
    q = {1: 1.0, 2: 1.0}
    assert other.find(vector={"splade": q}, limit=10).ids == da.find(vector={"splade": q}, limit=10).ids


def test_pandas_and_arrow_round_trip(da, make_da):
    """Arrow holds a sparse column as map<int32, float32> (JSON could not keep int keys)."""
    rng = np.random.default_rng(20)
    da.extend(sparse_docs(rng, 30))
    for frame in (da.to_arrow(), da.to_pandas()):
        other = make_da(Page, metric="ip")
        other.extend_columns(frame)
        assert [d.splade for d in other] == [d.splade for d in da]
        assert all(type(k) is int for d in other for k in d.splade)

def test_query_and_option_errors(da):
    da.extend(sparse_docs(np.random.default_rng(19), 10))
    with pytest.raises(hs.SchemaError, match="splade"):
        da.find(vector={"splade": {-1: 1.0}})
    with pytest.raises(hs.SchemaError, match="finite"):
        da.find(vector={"splade": {1: float("nan")}})
    with pytest.raises(hs.SchemaError, match="list of sparse vectors"):
        da.find_batched({"splade": {1: 1.0}})
    with pytest.raises(hs.ConfigError, match="not a vector field"):
        da.find(vector={"title": {1: 1.0}})
    with pytest.raises(hs.ConfigError, match="metric"):
        hs.DocumentArray(Page, storage="memory", metric={"splade": "ip"})
