"""Columns in and out on every storage: extend_columns, to_columns, to_pandas, to_arrow,
and the documents built from columns when read (public API only)."""
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch.document import same_value


class Item(hs.Document):
    title: hs.Text
    brand: hs.Keyword
    stock: int
    price: float
    sale: bool
    v: hs.Vector[4]
    note: Optional[str] = None
    tags: list[str] = []


class Sparse(hs.Document):
    title: Optional[hs.Text] = None
    brand: Optional[hs.Keyword] = None
    stock: Optional[int] = None
    price: Optional[float] = None
    sale: Optional[bool] = None
    v: Optional[hs.Vector[4]] = None
    extra: Optional[dict[str, int]] = None


def _columns(n, rng):
    return {"id": [f"i{k}" for k in range(n)],
            "title": [f"red shoe {k}" for k in range(n)],
            "brand": [f"b{k % 3}" for k in range(n)],
            "stock": rng.integers(-5, 100, n),
            "price": rng.random(n) * 100,
            "sale": rng.random(n) < 0.5,
            "v": rng.standard_normal((n, 4)).astype(np.float32),
            "tags": [[f"t{k}"] for k in range(n)]}


def _same_doc(a, b) -> bool:
    return all(same_value(getattr(a, f), getattr(b, f)) for f in type(a).model_fields)


def test_extend_columns_equals_extend_of_documents(make_da, rng):
    cols = _columns(60, rng)
    by_cols, by_docs = make_da(Item), make_da(Item)
    by_cols.extend_columns(cols)
    docs = [{k: (v[i].tolist() if k == "v" else v[i].item() if isinstance(v, np.ndarray) else v[i])
             for k, v in cols.items()} for i in range(60)]
    by_docs.extend(docs)
    assert len(by_cols) == 60
    for i in range(60):
        a, b = by_cols[f"i{i}"], by_docs[f"i{i}"]
        assert _same_doc(a, b), (a, b)
    out = by_cols.to_columns()
    assert out["id"] == cols["id"]
    assert out["stock"].dtype == np.int64 and np.array_equal(out["stock"], cols["stock"])
    assert out["price"].dtype == np.float64 and np.array_equal(out["price"], cols["price"])
    assert out["sale"].dtype == np.bool_ and np.array_equal(out["sale"], cols["sale"])
    assert out["v"].dtype == np.float32 and np.array_equal(out["v"], cols["v"])
    assert out["title"] == cols["title"] and out["brand"] == cols["brand"] and out["tags"] == cols["tags"]
    assert out["note"] == [None] * 60  # missing column -> the field's default (str: an unindexed field)
    # searches see the rows written as columns exactly as documents
    assert by_cols.find(filter={"brand": "b1", "stock": {"$gte": 10}}, limit=None).ids == \
        by_docs.find(filter={"brand": "b1", "stock": {"$gte": 10}}, limit=None).ids
    if by_cols.storage in ("memory", "sqlite"):
        assert by_cols.find(vector=cols["v"][3], limit=5).ids == by_docs.find(vector=cols["v"][3], limit=5).ids


def test_extend_columns_upserts_and_keeps_the_last_of_a_repeated_id(make_da, rng):
    da = make_da(Item)
    da.extend_columns(_columns(10, rng))
    cols = _columns(3, rng)
    cols["id"] = ["i1", "new", "i1"]
    cols["stock"] = np.array([1, 2, 3])
    da.extend_columns(cols)
    assert len(da) == 11
    assert da["i1"].stock == 3 and da["new"].stock == 2
    assert list(da.to_columns(["id"])["id"]) == [f"i{k}" for k in range(10)] + ["new"]


BAD = [
    ("stock", lambda n: np.array([1.0] * (n - 1) + [1.5]), "row 4", "integer"),
    ("stock", lambda n: np.ones(n, dtype=bool), "stock", "numbers"),
    ("price", lambda n: np.array([0.5, np.nan] + [1.0] * (n - 2)), "row 1", "finite"),
    ("price", lambda n: np.array([0.5] * (n - 1) + [np.inf]), "row 4", "finite"),
    ("v", lambda n: np.ones((n, 3), dtype=np.float32), "v", "(n, 4)"),
    ("v", lambda n: np.vstack([np.ones((2, 4)), [[np.nan, 0, 0, 0]], np.ones((n - 3, 4))]), "row 2", "NaN"),
    ("title", lambda n: ["a"] * (n - 1) + [7], "row 4", "string"),
    ("title", lambda n: ["a"] * (n - 2), "title", "rows"),
    ("brand", lambda n: ["a", None] + ["b"] * (n - 2), "row 1", "required"),
    ("sale", lambda n: [True, 1] + [False] * (n - 2), "row 1", "bool"),
    ("id", lambda n: ["x", ""] + [f"y{k}" for k in range(n - 2)], "row 1", "non-empty"),
    ("stock", lambda n: np.array([2 ** 63] * n, dtype=np.uint64), "row 0", "64-bit"),
    ("colour", lambda n: ["red"] * n, "colour", "no field"),
]


@pytest.mark.parametrize("name,make,where,what", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_extend_columns_refuses_a_bad_column_naming_it_and_writes_nothing(make_da, rng, name, make, where, what):
    da = make_da(Item)
    da.extend_columns(_columns(3, rng))
    before = da.to_columns()
    cols = _columns(5, rng)
    cols["id"] = [f"z{k}" for k in range(5)]
    cols[name] = make(5)
    with pytest.raises(hs.SchemaError) as e:
        da.extend_columns(cols)
    assert where in str(e.value) and what in str(e.value), str(e.value)
    assert len(da) == 3
    after = da.to_columns()
    assert after["id"] == before["id"] and np.array_equal(after["v"], before["v"])


def test_extend_columns_required_column_missing(make_da, rng):
    cols = _columns(4, rng)
    del cols["price"]
    with pytest.raises(hs.SchemaError, match="price.*missing"):
        make_da(Item).extend_columns(cols)


def test_missing_values_of_optional_fields_round_trip(make_da):
    da = make_da(Sparse)
    da.extend_columns({"id": ["a", "b", "c"], "title": [None, "blue sky", None], "brand": ["x", None, None],
                       "stock": [None, 3, None], "price": [1.5, None, None], "sale": [None, False, None],
                       "v": [None, [1, 0, 0, 0], None], "extra": [{"k": 1}, None, None]})
    out = da.to_columns()
    assert out["stock"].tolist() == [None, 3, None] and out["price"].tolist() == [1.5, None, None]
    assert out["sale"].tolist() == [None, False, None] and out["title"] == [None, "blue sky", None]
    assert out["v"][0] is None and np.array_equal(out["v"][1], [1, 0, 0, 0])
    assert out["extra"] == [{"k": 1}, None, None]
    assert da["b"].v.dtype == np.float32 and da["a"].v is None and da["a"].extra == {"k": 1}
    assert da.find(filter={"stock": {"$exists": True}}, limit=None).ids == ["b"]


def test_pandas_and_arrow_in_and_out(make_da, rng):
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    cols = _columns(20, rng)
    da = make_da(Item)
    frame = pd.DataFrame({k: (list(v) if k == "v" else v) for k, v in cols.items()})
    da.extend_columns(frame)
    back = da.to_pandas()
    assert list(back["id"]) == cols["id"] and np.array_equal(back["stock"].to_numpy(), cols["stock"])
    assert np.array_equal(np.stack(back["v"].to_list()), cols["v"])
    table = da.to_arrow(["id", "price", "v", "tags"])
    assert table.column_names == ["id", "price", "v", "tags"]
    assert table.column("v").type == pa.list_(pa.float32(), 4)
    other = make_da(Item)
    full = da.to_arrow()
    other.extend_columns(full)
    for i in cols["id"]:
        assert _same_doc(other[i], da[i])


def test_results_load_only_the_hits_read(make_da, rng):
    """Documents are read by id when a hit is read, not by the search (hs.Results, API.md): a
    change made after the search shows in what is read after it; res[i] reads hit i alone, and
    res.docs reads every hit once, on its first access. Storages whose search answer holds the
    documents (elasticsearch, opensearch, weaviate) give them as the search found them."""
    da = make_da(Item)
    da.extend_columns(_columns(30, rng))
    every = {"stock": {"$gte": -100}}
    res = da.find(filter=every, limit=10)
    found = [da[i].stock for i in res.ids]
    da.update_many(every, stock=1000)
    hit = res[3]
    assert hit.id == res.ids[3] and hit.doc.id == res.ids[3]
    if da.storage in ("elasticsearch", "opensearch", "weaviate"):  # their search brings the documents along
        assert hit.doc.stock == found[3] and [d.stock for d in res.docs] == found
        return
    assert hit.doc.stock == 1000  # read now: the search itself read no document
    da.update_many(every, stock=2000)
    assert res[3].doc.stock == 2000  # each res[i] reads its hit again while res.docs was never read
    assert [d.id for d in res.docs] == res.ids
    assert [d.stock for d in res.docs] == [2000] * 10  # reading hit 3 loaded no other hit
    da.update_many(every, stock=3000)
    assert [d.stock for d in res.docs] == [2000] * 10 and res[5].doc.stock == 2000  # loaded once


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
INT53 = ("weaviate",)  # storages holding ints exactly only up to +-2**53 (an UnsupportedError beyond)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(text, st.integers(-2 ** 63, 2 ** 63 - 1) | st.none(),
                               st.floats(allow_nan=False, allow_infinity=False) | st.none(),
                               st.booleans() | st.none(),
                               st.lists(st.integers(-10 ** 6, 10 ** 6).map(lambda x: x / 64), min_size=4, max_size=4) | st.none(),
                               st.dictionaries(st.text(max_size=4), st.integers(-9, 9), max_size=2) | st.none()),
                     min_size=1, max_size=12))
def test_columnar_round_trip_equals_the_documents_written(empty_da, rows):
    da = empty_da(Sparse)
    docs = [Sparse(id=f"d{i}", title=t or None, brand=t[:3] or None, stock=s, price=p, sale=b,
                   v=v if v is None or any(v) else None, extra=x) for i, (t, s, p, b, v, x) in enumerate(rows)]
    if da.storage in INT53 and any(d.stock is not None and abs(d.stock) > 2 ** 53 for d in docs):
        with pytest.raises(hs.UnsupportedError, match="2\\*\\*53"):  # its numbers travel as float64
            da.extend(docs)
        assert len(da) == 0
        return
    da.extend(docs)
    for d in docs:
        assert _same_doc(da[d.id], d), (da[d.id], d)
    assert [d.id for d in da] == [d.id for d in docs]
    out = da.to_columns()
    for i, d in enumerate(docs):
        for name in Sparse.model_fields:
            got = out[name][i]
            want = getattr(d, name)
            if name == "v" and want is not None:
                assert np.array_equal(got, want)
            else:
                assert (got is None and want is None) or same_value(type(want)(got), want), (name, got, want)
