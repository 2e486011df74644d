"""hs.MultiVector[d] fields (API.md section 10, issue 30 item 3): the value rules at the schema
(SchemaError naming the field: shape, 1..4096 tokens, the dense rules per row), the float32
read-back; exact MaxSim search on the storages holding them against numpy (tests/models.py
maxsim_scores) and the N-list fusion model (fusion_reference); writes, columns; and the refusal
of every storage that does not hold multi-vectors.

Public API only."""
import math
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.section10 import (PERSISTENT, REFUSING, assert_refused_at_open, assert_topk_of, replay,
                                     write_ops)
from tests.contract.test_lexical import best_fields
from tests.models import check_topk, exact_scores, fusion_reference, maxsim_scores

# the storages holding multi-vector fields (memory-path, hnsw and sqlite join when they carry them)
WIRED = ("memory", "memory-path", "hnsw", "hnsw-path", "sqlite", "qdrant", "qdrant-path", "qdrant-client",
         "elasticsearch", "opensearch", "weaviate")
storage = storage_fixture(WIRED)
WORDS = "red green blue cable phone case usb charger".split()


class Multi(hs.Document):
    title: hs.Text = ""
    colbert: Optional[hs.MultiVector[4]] = None


class Required(hs.Document):
    colbert: hs.MultiVector[3]


def test_values_are_read_back_as_float32_token_blocks():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((7, 4))
    doc = Multi(colbert=X)
    assert doc.colbert.dtype == np.float32 and doc.colbert.shape == (7, 4)
    np.testing.assert_array_equal(doc.colbert, X.astype(np.float32))
    assert Multi(colbert=X.tolist()).colbert.tolist() == doc.colbert.tolist()
    X[0, 0] = 99.0  # the document holds its own copy
    assert doc.colbert[0, 0] != 99.0
    assert Multi().colbert is None
    assert Multi(colbert=np.ones((4096, 4))).colbert.shape == (4096, 4)


def test_json_round_trip():
    doc = Multi(id="x", colbert=np.arange(8, dtype=np.float32).reshape(2, 4) + 1)
    back = Multi.model_validate_json(doc.model_dump_json())
    np.testing.assert_array_equal(back.colbert, doc.colbert)


def test_a_required_multi_vector_must_be_given():
    with pytest.raises(hs.SchemaError, match="Required.colbert: required field is missing"):
        Required()
    with pytest.raises(hs.SchemaError, match="Required.colbert"):
        Required(colbert=None)


@pytest.mark.parametrize("value, match", [
    (np.ones((2, 3)), r"shape \(n_tokens, 4\)"),
    (np.ones(4), r"shape \(n_tokens, 4\)"),
    (np.ones((1, 2, 4)), r"shape \(n_tokens, 4\)"),
    (np.ones((0, 4)), "0 rows; it needs 1 to 4096"),
    (np.ones((4097, 4)), "4097 rows; it needs 1 to 4096"),
    ([[1, 2, 3, float("nan")]], "row 0 is not finite"),
    ([[1, 1, 1, 1], [1, float("inf"), 1, 1]], "row 1 is not finite"),
    ([[1e20, 0, 0, 0]], r"norm is outside \[1e-15, 1e\+15\]"),
    ([[1, 1, 1, 1], [0, 0, 0, 0]], "row 1"),
    ([[1, 2], [3]], "shape"),
    ("abcd", "real numbers"),
    (np.ones((1, 4), dtype=np.complex64), "real numbers"),
    ({1: 2.0}, "real numbers"),
    ([["a", "b", "c", "d"]], "shape"),
])
def test_bad_values_are_schema_errors_naming_the_field(value, match):
    with pytest.raises(hs.SchemaError, match=match) as e:
        Multi(colbert=value)
    assert "Multi.colbert" in str(e.value)


@pytest.mark.parametrize("dim", [0, -1, 2.0, "4", True])
def test_a_bad_dimension_is_a_schema_error(dim):
    with pytest.raises(hs.SchemaError, match="hs.MultiVector"):
        hs.MultiVector[dim]


def test_bare_multi_vector_is_a_schema_error():
    with pytest.raises(hs.SchemaError, match="hs.MultiVector\\[d\\]"):
        class Bare(hs.Document):
            colbert: hs.MultiVector


# ------------------------------------------------------------------ durability
BLOCKS = [None, np.eye(6)[:1], np.eye(6)[1:4] * 2, np.arange(12, dtype=np.float32).reshape(2, 6) + 1,
          np.full((5, 6), -0.5)]


def open_at(storage, path, **opts):
    kind, name = PERSISTENT[storage]
    return hs.DocumentArray(Page, storage=kind, path=path / name, metric=dict(METRICS), **opts)


def assert_same_as_model(da, model: dict):
    docs = {d.id: d for d in da}
    assert set(docs) == set(model)
    for i, d in docs.items():
        want = model[i]["colbert"]
        assert (d.colbert is None and want is None) or np.array_equal(d.colbert, np.float32(want)), i
    for Q in (np.eye(6)[:2], np.ones((3, 6))):
        assert_topk_of(da.find(vector={"colbert": Q}, limit=5), maxsim_model(docs, "colbert", Q), 5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=write_ops(st.integers(0, len(BLOCKS) - 1)))
def test_every_write_survives_close_and_reopen(storage, tmp_path_factory, ops):
    if storage not in PERSISTENT:
        pytest.skip("no files")
    replay(storage, tmp_path_factory.mktemp("multi"), ops, open_at, "colbert", value_of=lambda b: BLOCKS[b],
           scaled=lambda block, i: None if block is None else block * (1 + i % 2), model_of=lambda v: v,
           check=assert_same_as_model)


# ------------------------------------------------------------------ hnsw: FDE candidates, exact rescoring
class Colbert(hs.Document):
    tag: hs.Keyword = "a"
    colbert: Optional[hs.MultiVector[32]] = None


def test_hnsw_fde_candidates_rescored_exactly_reach_the_stated_recall(storage, make_da, tmp_path):
    """exact_max=0 makes the hnsw storage walk the FDE graph for any collection size; the hits'
    scores are exact MaxSim and recall@10 against exhaustive MaxSim is >= 0.95 (the figure
    docs/storages/hnsw.md states); writes and a reopen keep the graph in step."""
    if storage not in ("hnsw", "hnsw-path"):
        pytest.skip("the FDE graph is the hnsw storage's")
    from hybridsearch.bench.multivectors import colbert_like  # ColBERT-like data (topics + noise)
    docs, queries = colbert_like(1000, 8, dim=32, tokens=(8, 24), query_tokens=8, topics=150, seed=3)
    path = tmp_path / "fde"
    da = (hs.DocumentArray(Colbert, storage="hnsw", path=path, exact_max=0) if storage == "hnsw-path"
          else make_da(Colbert, exact_max=0))
    da.extend([{"id": f"d{i}", "tag": "ab"[i % 2], "colbert": b if i % 10 else None} for i, b in enumerate(docs)])
    held = {f"d{i}": b for i, b in enumerate(docs) if i % 10}

    def recall(da, held, flt=None, allowed=None):
        ids = [i for i in held if allowed is None or i in allowed]
        out = []
        for Q in queries:
            res = da.find(vector={"colbert": Q}, limit=10, filter=flt)
            ref = maxsim_scores([held[i] for i in ids], Q, "cosine")
            got = dict(zip(ids, ref.tolist()))
            np.testing.assert_allclose(res.scores, [got[i] for i in res.ids], rtol=1e-4, atol=1e-4)
            assert set(res.ids) <= set(ids) and list(res.scores) == sorted(res.scores, reverse=True)
            top = [ids[j] for j in np.argsort(-ref, kind="stable")[:10]]
            out.append(len(set(top) & set(res.ids)) / 10)
        return float(np.mean(out))

    assert da.stats()["fde_graph_nodes"] == {"colbert": len(held)}  # documents without the field are not nodes
    assert recall(da, held) >= 0.95
    allowed = {i for n, i in enumerate(held) if int(i[1:]) % 2 == 1}
    assert recall(da, held, {"tag": "b"}, allowed) >= 0.95
    # writes: deleted documents and removed fields are never hits; updated ones are found
    gone = [f"d{i}" for i in range(1, 400, 3)]
    da.delete(gone)
    for i in gone:
        held.pop(i, None)
    da.update_many({"id": {"$in": ["d2", "d6"]}}, colbert=None)
    held.pop("d2")
    held.pop("d6")
    da.update("d5", colbert=queries[0])
    held["d5"] = np.float32(queries[0])
    assert da.find(vector={"colbert": queries[0]}, limit=1).ids == ["d5"]
    assert da.stats()["fde_graph_nodes"] == {"colbert": len(held)}
    assert recall(da, held) >= 0.95
    if storage == "hnsw-path":
        da.close()
        again = hs.DocumentArray(Colbert, storage="hnsw", path=path, exact_max=0)
        assert again.stats()["fde_graph_nodes"] == {"colbert": len(held)}  # mapped from the snapshot
        assert recall(again, held) >= 0.95
        again.close()


@pytest.mark.parametrize("kind", REFUSING)
def test_storages_without_multi_vectors_refuse_the_schema_at_open(kind, tmp_path):
    assert_refused_at_open(Multi, "hs.MultiVector", "colbert", kind, tmp_path)



# ------------------------------------------------------------------ search on the storages holding them
class Page(hs.Document):
    title: hs.Text = ""
    description: hs.Text = ""  # best_fields, the lexical model, reads both text fields
    tag: hs.Keyword = "a"
    price: int = 0
    emb: hs.Vector[4]
    colbert: Optional[hs.MultiVector[6]] = None
    second: Optional[hs.MultiVector[3]] = None


METRICS = {"colbert": "cosine", "second": "l2", "emb": "ip"}


def multi_docs(rng, n, start=0):
    """Pages with 1..12 token rows; every fourth has no colbert, every third no second."""
    out = []
    for i in range(start, start + n):
        out.append({"id": f"p{i}", "title": " ".join(rng.choice(WORDS, rng.integers(1, 4))),
                    "tag": "abc"[i % 3], "price": i, "emb": rng.standard_normal(4),
                    "colbert": None if i % 4 == 0 else rng.standard_normal((int(rng.integers(1, 13)), 6)),
                    "second": None if i % 3 == 0 else rng.standard_normal((int(rng.integers(1, 5)), 3))})
    return out


def maxsim_model(docs: dict, field: str, Q, allowed=None) -> dict:
    """id -> numpy MaxSim of every document holding `field` (and in `allowed`, None: all)."""
    ids = [i for i, d in docs.items() if getattr(d, field) is not None and (allowed is None or i in allowed)]
    s = maxsim_scores([getattr(docs[i], field) for i in ids], np.asarray(Q, dtype=np.float32), METRICS[field])
    return dict(zip(ids, s.tolist()))


@pytest.fixture
def da(make_da):
    return make_da(Page, metric={"colbert": "cosine", "second": "l2", "emb": "ip"})


@pytest.mark.parametrize("field, dim", [("colbert", 6), ("second", 3)])
def test_maxsim_top_k_equals_numpy(da, field, dim):
    rng = np.random.default_rng(21)
    da.extend(multi_docs(rng, 200))
    docs = {d.id: d for d in da}
    for trial in range(10):
        Q = rng.standard_normal((int(rng.integers(1, 9)), dim))
        for k in (1, 10, 300):
            res = da.find(vector={field: Q}, limit=k, exact=bool(trial % 2))
            assert_topk_of(res, maxsim_model(docs, field, Q), k)
            assert list(res.part_scores) == [field]


def test_l2_maxsim_ranks_rows_far_from_the_origin_exactly(make_da):
    """Rows near (1000, 1000): their l2 distances to the query differ by far less than |x|^2,
    so a ranking through 2q.x - |x|^2 in float32 cannot tell them apart; the top-k, its pages
    and a filtered find must all follow the exact distances (numpy MaxSim)."""
    rng = np.random.default_rng(24)
    near = [{"id": f"n{i}", "tag": "a", "emb": [1, 0, 0, 0],
             "second": np.float32([1000, 1000, 1000]) + np.float32(rng.uniform(-0.05, 0.05, (2, 3)))}
            for i in range(40)]
    rest = [{"id": f"o{i}", "tag": "b", "emb": [1, 0, 0, 0], "second": [[-5.0 - i, 3, 0]]} for i in range(20)]
    da = make_da(Page, metric={"second": "l2"})
    da.extend(near + rest)
    docs = {d.id: d for d in da}
    Q = np.float32([[1000, 1000, 1000], [1000.01, 999.99, 1000]])
    model = maxsim_model(docs, "second", Q)
    for exact in (False, True):
        res = da.find(vector={"second": Q}, limit=10, exact=exact)
        assert_topk_of(res, model, 10)
        pages = [da.find(vector={"second": Q}, limit=5, offset=o, exact=exact).ids for o in (0, 5)]
        assert pages[0] + pages[1] == res.ids
    res = da.find(vector={"second": Q}, filter={"tag": "a"}, limit=10)
    assert_topk_of(res, {i: v for i, v in model.items() if docs[i].tag == "a"}, 10)


def test_the_metric_defaults_to_cosine_and_follows_the_option(make_da):
    rng = np.random.default_rng(22)
    data = multi_docs(rng, 60)
    Q = rng.standard_normal((3, 6)) * 5
    plain = make_da(Page)
    plain.extend(data)
    docs = {d.id: d for d in plain}
    ids = [i for i, d in docs.items() if d.colbert is not None]
    for metric, da in (("cosine", plain), ("ip", make_da(Page, metric="ip")), ("l2", make_da(Page, metric="l2"))):
        if len(da) == 0:
            da.extend(data)
        res = da.find(vector={"colbert": Q}, limit=5)
        want = maxsim_scores([docs[i].colbert for i in ids], np.float32(Q), metric)
        check_topk(res.ids, res.scores, ids, want, 5)


def test_filters_are_pre_filters_and_ties_go_to_insertion_order(da):
    rng = np.random.default_rng(23)
    da.extend(multi_docs(rng, 150))
    docs = {d.id: d for d in da}
    allowed = {i for i, d in docs.items() if d.tag == "b" and d.price >= 40}
    for _ in range(5):
        Q = rng.standard_normal((4, 6))
        res = da.find(vector={"colbert": Q}, filter={"tag": "b", "price": {"$gte": 40}}, limit=10)
        assert_topk_of(res, maxsim_model(docs, "colbert", Q, allowed), 10)
        assert set(res.ids) <= allowed
    twins = [{"id": f"t{i}", "emb": [1, 0, 0, 0], "colbert": np.eye(6)[:2]} for i in range(8)]
    da.extend(twins)
    res = da.find(vector={"colbert": np.eye(6)[:2]}, filter={"id": {"$in": [f"t{i}" for i in range(8)]}}, limit=4)
    assert res.ids == ["t0", "t1", "t2", "t3"] and np.allclose(res.scores, 2.0)


def test_offset_min_score_and_batched(da):
    rng = np.random.default_rng(24)
    da.extend(multi_docs(rng, 120))
    Q = rng.standard_normal((3, 6))
    full = da.find(vector={"colbert": Q}, limit=30)
    assert da.find(vector={"colbert": Q}, limit=10, offset=10).ids == full.ids[10:20]
    cut = float(full.scores[6])
    assert da.find(vector={"colbert": Q}, limit=30, min_score=cut).ids == [
        i for i, s in zip(full.ids, full.scores) if s >= cut]
    Qs = [rng.standard_normal((int(rng.integers(1, 5)), 6)) for _ in range(12)]
    batched = da.find_batched({"colbert": Qs}, limit=6, filter={"tag": {"$ne": "a"}})
    for q, res in zip(Qs, batched):
        one = da.find(vector={"colbert": q}, limit=6, filter={"tag": {"$ne": "a"}})
        assert res.ids == one.ids and np.array_equal(res.scores, one.scores)
    assert len(batched) == len(Qs)


@pytest.mark.parametrize("fusion", ["rrf", "sum", "linear"])
def test_fusion_with_text_and_a_dense_field_matches_the_model(da, fusion):
    rng = np.random.default_rng(25)
    da.extend(multi_docs(rng, 150))
    docs = {d.id: d for d in da}
    for trial in range(6):
        text = " ".join(rng.choice(WORDS, 2)) if trial % 3 else None
        qs = {"colbert": rng.standard_normal((3, 6)), "emb": rng.standard_normal(4)}
        if trial % 2:
            qs["second"] = rng.standard_normal((2, 3))
        c = [5, 30, 100][trial % 3]
        weights = None
        if fusion == "linear" and trial >= 3:  # a weight for each list of this find, no others
            weights = {k: w for k, w in {"text": 0.3, "colbert": 0.4, "emb": 0.1, "second": 0.2}.items()
                       if k in qs or (k == "text" and text is not None)}
        flt = {"price": {"$lt": 110}} if trial >= 4 else None
        allowed = None if flt is None else {i for i, d in docs.items() if d.price < 110}
        res = da.find(text=text, vector=qs, fusion=fusion, candidates=c, limit=10, weights=weights, filter=flt)
        lists = []
        if text is not None:
            bm = {i: s for i, s in best_fields(docs, text).items() if allowed is None or i in allowed}
            lists.append(("text", bm, False, 0.0))
        for field, q in qs.items():
            if field == "emb":
                ids = [i for i in docs if allowed is None or i in allowed]
                X = np.array([docs[i].emb for i in ids])
                scores = dict(zip(ids, exact_scores(X, np.float32(q), "ip").tolist()))
            else:
                scores = maxsim_model(docs, field, q, allowed)
            lists.append((field, scores, False, math.nan))
        labels = [name for name, *_ in lists]
        assert weights is None or set(weights) == set(labels)
        fused, parts = fusion_reference(list(docs), lists, fusion, candidates=c, weights=weights)
        assert len(res) == min(10, len(fused))
        for i, s in zip(res.ids, res.scores):
            assert math.isclose(float(s), fused[i], rel_tol=1e-4, abs_tol=1e-4), (i, s, fused[i])
        kth = float(res.scores[-1])
        assert all(v <= kth + 1e-4 * max(1.0, abs(kth)) for i, v in fused.items() if i not in set(res.ids))
        assert set(res.part_scores) == set(labels)
        for name, want in parts.items():
            for i, g in zip(res.ids, res.part_scores[name].tolist()):
                assert math.isnan(g) if math.isnan(want[i]) else math.isclose(g, want[i], rel_tol=1e-4, abs_tol=1e-4)


def test_updates_deletes_and_writes_by_condition(da):
    rng = np.random.default_rng(26)
    da.extend(multi_docs(rng, 120))
    Q = rng.standard_normal((2, 6))
    da.update("p3", colbert=np.vstack([Q, Q]))
    np.testing.assert_array_equal(da["p3"].colbert, np.float32(np.vstack([Q, Q])))
    assert da.find(vector={"colbert": Q}, limit=1).ids == ["p3"]  # cosine 1 per query row: the best
    da.update("p3", colbert=None)  # absent: never a hit
    assert da["p3"].colbert is None and "p3" not in da.find(vector={"colbert": Q}, limit=200).ids
    da.delete(["p5"])
    assert "p5" not in da.find(vector={"colbert": Q}, limit=200).ids
    n_b = da.update_many({"tag": "b"}, second=np.ones((2, 3)))
    assert n_b == sum(1 for d in da if d.tag == "b")
    assert da.delete(filter={"price": {"$lt": 30}}) > 0
    docs = {d.id: d for d in da}
    assert all(np.array_equal(d.second, np.ones((2, 3), np.float32)) for d in docs.values() if d.tag == "b")
    for field, dim in (("colbert", 6), ("second", 3)):
        q = rng.standard_normal((3, dim))
        assert_topk_of(da.find(vector={field: q}, limit=10), maxsim_model(docs, field, q), 10)
    with pytest.raises(hs.SchemaError, match="colbert"):
        da.update("p50", colbert=np.ones((1, 5)))
    assert np.array_equal(da["p50"].colbert, docs["p50"].colbert) or da["p50"].colbert is docs["p50"].colbert


def test_many_writes_and_deletes_keep_the_tokens_in_step(da):
    """Enough deletes to compact the rows: the token store follows the renumbered rows."""
    rng = np.random.default_rng(27)
    model = set()
    for round_ in range(4):
        batch = multi_docs(rng, 700, start=round_ * 700)
        da.extend(batch)
        model |= {d["id"] for d in batch}
        gone = [i for n, i in enumerate(sorted(model, key=lambda s: int(s[1:]))) if n % 3 != 2]
        da.delete(gone)
        model -= set(gone)
    docs = {d.id: d for d in da}
    assert set(docs) == model
    for _ in range(5):
        Q = rng.standard_normal((3, 6))
        assert_topk_of(da.find(vector={"colbert": Q}, limit=10), maxsim_model(docs, "colbert", Q), 10)


def test_columns_round_trip(da, make_da):
    rng = np.random.default_rng(28)
    da.extend(multi_docs(rng, 40))
    cols = da.to_columns()
    assert isinstance(cols["colbert"], list)
    assert all(v is None or (isinstance(v, np.ndarray) and v.shape[1] == 6) for v in cols["colbert"])
    other = make_da(Page, metric=dict(METRICS))
    other.extend_columns(cols)
    for a, b in zip(other, da):
        assert (a.colbert is None and b.colbert is None) or np.array_equal(a.colbert, b.colbert)
    Q = rng.standard_normal((2, 6))
    assert other.find(vector={"colbert": Q}, limit=10).ids == da.find(vector={"colbert": Q}, limit=10).ids
    # a 3-d array is a column of equal-sized token blocks, one per row
    third = make_da(Page, metric=dict(METRICS))
    blocks = rng.standard_normal((5, 3, 6)).astype(np.float32)
    third.extend_columns({"id": [f"x{i}" for i in range(5)], "emb": np.ones((5, 4)), "colbert": blocks})
    assert all(np.array_equal(third[f"x{i}"].colbert, blocks[i]) for i in range(5))
    with pytest.raises(hs.SchemaError, match="colbert"):
        third.extend_columns({"id": ["y"], "emb": np.ones((1, 4)), "colbert": np.ones((1, 3, 5))})


def test_pandas_and_arrow_round_trip(da, make_da):
    rng = np.random.default_rng(30)
    da.extend(multi_docs(rng, 30))
    for frame in (da.to_arrow(), da.to_pandas()):
        other = make_da(Page, metric=dict(METRICS))
        other.extend_columns(frame)
        for a, b in zip(other, da):
            for f in ("colbert", "second"):
                x, y = getattr(a, f), getattr(b, f)
                assert (x is None and y is None) or np.array_equal(x, y), (a.id, f)

def test_query_and_option_errors(da):
    da.extend(multi_docs(np.random.default_rng(29), 10))
    with pytest.raises(hs.SchemaError, match="colbert"):
        da.find(vector={"colbert": np.ones((2, 5))})
    with pytest.raises(hs.SchemaError, match="0 rows"):
        da.find(vector={"colbert": np.ones((0, 6))})
    with pytest.raises(hs.SchemaError, match="not finite"):
        da.find(vector={"colbert": [[np.nan] * 6]})
    with pytest.raises(hs.SchemaError, match="token blocks"):
        da.find_batched({"colbert": "abc"})
    with pytest.raises(hs.ConfigError, match="metric"):
        hs.DocumentArray(Page, storage="memory", metric={"colbert": "hamming"})
