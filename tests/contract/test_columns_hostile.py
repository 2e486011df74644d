"""extend_columns under hostile columns, and to_arrow / to_pandas of every storable value, on every
embedded storage (public API only).

A refused call raises hs.SchemaError naming the column and writes nothing: the collection reads
back exactly as before, also after closing and reopening a file-backed one. An accepted call
equals the model: the same rows written as documents, one by one, with `extend`.
"""
import json
from typing import Any, Optional

import numpy as np
import pytest
from hypothesis import assume, HealthCheck, event, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import EMBEDDED, storage_fixture

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

FILE_BACKED = {"memory-path", "hnsw-path", "sqlite", "annlite", "qdrant-path"}


storage = storage_fixture(EMBEDDED)  # the remote engines receive the same validated batch


class Row(hs.Document):
    title: hs.Text = ""
    brand: hs.Keyword
    category: Optional[hs.Keyword] = None
    price: int = 0
    rating: float = 0.0
    flag: bool = False
    meta: Any = None
    tags: list = []
    embedding: Optional[hs.Vector[4]] = None


FIELDS = list(Row.model_fields)
START = [dict(id=f"d{i}", title=f"word{i} item", brand=f"b{i % 2}", category=["a", None][i % 2], price=i,
              rating=i / 4, flag=bool(i % 2), meta={"n": i}, tags=[str(i)],
              embedding=[1.0, float(i), 0.5, -1.0]) for i in range(1, 4)]


def _plain(v):
    """A value as comparable plain data: arrays keep their dtype and shape, floats their sign."""
    if isinstance(v, np.ndarray):
        items = [_plain(x) for x in v.tolist()] if v.dtype == object else v.tolist()
        return ("array", v.dtype.str, v.shape, repr(items))
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return repr(v)


def state(da) -> tuple:
    """Everything a user reads back: the count, to_columns() and every document, in order."""
    return len(da), _plain(da.to_columns()), [d.model_dump_json() for d in da]


@pytest.fixture
def opened(make_da, storage, tmp_path):
    """open(k): collection k of this test (its files under tmp_path when file-backed; the same k
    opens the same files again)."""
    def open_(k: int = 0):
        if storage in FILE_BACKED:
            return make_da(Row, path=tmp_path / (f"c{k}.db" if storage == "sqlite" else f"c{k}"))
        return make_da(Row)
    return open_


def _refused_and_unchanged(opened, storage, payload, *words) -> None:
    da = opened()
    da.extend(START)
    before = state(da)
    with pytest.raises(hs.SchemaError) as e:
        da.extend_columns(payload() if callable(payload) else payload)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert "nothing was written" in str(e.value)
    assert state(da) == before
    if storage in FILE_BACKED:
        da.close()
        assert state(opened()) == before


def _two(**cols) -> dict:
    """Columns updating d1 and adding d9 (price 99, 98): a refused call must change neither."""
    out = {"id": ["d1", "d9"], "brand": ["x", "y"], "price": [99, 98]}
    out.update(cols)
    return out


# ------------------------------------------------------------ refusals naming the column
BAD = [
    ("2-D float array", lambda: _two(rating=np.ones((2, 2))), ("rating", "one value per row")),
    ("2-D int array", lambda: _two(price=np.ones((2, 2), dtype=np.int64)), ("price", "one value per row")),
    ("rows of lists for a float", lambda: _two(rating=[[1.0, 2.0], [3.0, 4.0]]), ("rating", "row 0", "number")),
    ("2-D str array", lambda: _two(title=np.array([["a", "b"], ["c", "d"]])), ("title", "one value per row")),
    ("a scalar column", lambda: _two(rating=5.0), ("rating", "single value")),
    ("a scalar id", lambda: _two(id=7), ("id", "single value")),
    ("a str column", lambda: _two(title="ab"), ("title", "single string")),
    ("a str id column", lambda: _two(id="ab"), ("id", "single string")),
    ("a bytes column", lambda: _two(title=b"ab"), ("title", "single")),
    ("a set column", lambda: _two(tags={1, 2}), ("tags", "set")),
    ("a dict column", lambda: _two(meta={"a": 1, "b": 2}), ("meta", "dict")),
    ("a DataFrame as a column", lambda: _two(meta=pd.DataFrame({"a": [1, 2]})), ("meta", "DataFrame")),
    ("10**400 for a float", lambda: _two(rating=[10 ** 400, 1.0]), ("rating", "row 0", "finite")),
    ("-10**400 for a float, numpy object", lambda: _two(rating=np.array([1.0, -10 ** 400], dtype=object)),
     ("rating", "row 1", "finite")),
    ("10**400 in a vector", lambda: _two(embedding=[[1, 0, 0, 0], [10 ** 400, 0, 0, 0]]),
     ("embedding", "row 1")),
    ("a longdouble beyond float64", lambda: _two(rating=np.array([1.0, np.longdouble("1e400")])),
     ("rating", "row 1", "finite")),
    ("strings in a vector", lambda: _two(embedding=[["1", "2", "3", "4"], [1, 0, 0, 0]]),
     ("embedding", "row 0", "number")),
    ("a bool in a vector", lambda: _two(embedding=[[1, 0, 0, 0], [True, 1.0, 0, 0]]),
     ("embedding", "row 1", "number")),
    ("a str row in a vector", lambda: _two(embedding=[[1, 0, 0, 0], "abcd"]), ("embedding", "row 1")),
    ("np.float32 1.5 for an int", lambda: _two(price=[np.float32(1.5), 3]), ("price", "row 0", "integer")),
    ("np.float32 NaN for an int", lambda: _two(price=[3, np.float32("nan")]), ("price", "row 1", "integer")),
    ("np.uint64 beyond int64", lambda: _two(price=[3, np.uint64(2 ** 64 - 1)]), ("price", "row 1", "64-bit")),
]


@pytest.mark.parametrize("case,payload,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_column_is_refused_naming_it_and_nothing_is_written(opened, storage, case, payload, words):
    _refused_and_unchanged(opened, storage, payload, *words)


def test_duplicate_pandas_columns_are_refused(opened, storage):
    frame = pd.DataFrame([["d1", "x", 99, 5], ["d9", "y", 98, 6]], columns=["id", "brand", "price", "price"])
    _refused_and_unchanged(opened, storage, frame, "price", "twice")


@pytest.mark.parametrize("kind", ["table", "record batch"])
def test_duplicate_arrow_columns_are_refused(opened, storage, kind):
    arrays = [pa.array(["d1", "d9"]), pa.array(["x", "y"]), pa.array([99, 98]), pa.array([5, 6])]
    make = pa.Table.from_arrays if kind == "table" else pa.RecordBatch.from_arrays
    _refused_and_unchanged(opened, storage, make(arrays, names=["id", "brand", "price", "price"]), "price", "twice")


def test_a_column_of_the_wrong_kind_of_frame_is_refused(opened, storage):
    _refused_and_unchanged(opened, storage, [{"id": "d1", "brand": "x"}], "dict of columns")


# ------------------------------------------------------------ accepted forms equal their documents
def _model_state(rows: list) -> tuple:
    """The model: START and then `rows` written as documents, one by one, with extend."""
    model = hs.DocumentArray(Row, storage="memory")
    model.extend(START)
    for r in rows:
        model.extend([r])
    return state(model)


VEC = np.array([[0.5, 0, 0, 1], [0, 2, 0, 0]], dtype=np.float32)
ROWS = [dict(id="d1", brand="x", price=99, embedding=VEC[0]), dict(id="d9", brand="y", price=98, embedding=VEC[1])]


@pytest.mark.parametrize("form", ["generator columns", "tuple columns", "record batch", "record batch of lists",
                                  "pandas series", "arrow arrays"])
def test_other_column_forms_are_read_like_lists(opened, storage, form):
    cols = {"id": ["d1", "d9"], "brand": ["x", "y"], "price": [99, 98], "embedding": VEC}
    if form == "generator columns":
        payload = {k: (x for x in v) for k, v in cols.items()}
    elif form == "tuple columns":
        payload = {k: tuple(v) for k, v in cols.items()}
    elif form == "pandas series":
        payload = {k: pd.Series(list(v), index=[7, 3]) for k, v in cols.items()}
    else:
        vec = (pa.FixedSizeListArray.from_arrays(pa.array(VEC.reshape(-1)), 4) if form != "record batch of lists"
               else pa.array(VEC.tolist(), pa.list_(pa.float32())))
        arrays = [pa.array(cols["id"]), pa.array(cols["brand"]), pa.array(cols["price"]), vec]
        if form == "arrow arrays":
            payload = dict(zip(cols, arrays))
        else:
            payload = pa.RecordBatch.from_arrays(arrays, names=list(cols))
    da = opened()
    da.extend(START)
    da.extend_columns(payload)
    assert state(da) == _model_state(ROWS)


@pytest.mark.parametrize("kind", ["table", "record batch"])
def test_a_sliced_arrow_vector_column_reads_its_own_rows(opened, storage, kind):
    data = {"id": ["a", "d1", "d9"], "brand": ["z", "x", "y"], "price": [0, 99, 98],
            "embedding": pa.FixedSizeListArray.from_arrays(
                pa.array(np.vstack([[9, 9, 9, 9], VEC]).reshape(-1).astype(np.float32)), 4)}
    table = pa.table(data) if kind == "table" else pa.RecordBatch.from_pydict(data)
    da = opened()
    da.extend(START)
    da.extend_columns(table.slice(1))
    assert state(da) == _model_state(ROWS)


# ------------------------------------------------------------ to_arrow / to_pandas of stored data
ODD = [dict(meta=10 ** 30), dict(meta=-(10 ** 30)), dict(tags=[1, "a"]), dict(meta=[1, "a", None, 2.5]),
       dict(meta={"a": 1}), dict(meta={"b": [1.5, {"c": None}]}), dict(meta=1.0), dict(meta="x"),
       dict(tags=[10 ** 30]), dict(tags=[]), dict(meta=[])]


def _arrow_cells(table, name) -> list:
    """A column's values read with Arrow alone: the values, or their JSON text where the field's
    metadata says so (docs/usage.md)."""
    cells = table.column(name).to_pylist()
    if (table.schema.field(name).metadata or {}).get(b"hybridsearch.encoding") == b"json":
        cells = [None if c is None else json.loads(c) for c in cells]
    return cells


def test_to_arrow_and_pandas_carry_every_storable_value(opened, storage):
    rows = [dict(id=f"o{i}", brand="b", **kw) for i, kw in enumerate(ODD)]
    da = opened()
    da.extend(rows)
    table = da.to_arrow()
    for name in ("meta", "tags"):
        want = [Row(**r).model_dump(mode="json")[name] for r in rows]
        assert _plain(_arrow_cells(table, name)) == _plain(want), name
    assert _plain(da.to_pandas()["meta"].tolist()) == _plain([Row(**r).meta for r in rows])
    for k, back in enumerate((table, da.to_pandas()), start=1):
        other = opened(k)
        other.extend_columns(back)
        assert state(other) == state(da)


def test_to_arrow_keeps_columns_arrow_can_hold_as_arrow_types(opened, storage):
    da = opened()
    da.extend([dict(id="a", brand="b", tags=["x", "y"], meta={"k": 1}), dict(id="c", brand="d", meta={"k": 2})])
    table = da.to_arrow()
    assert table.schema.field("tags").type == pa.list_(pa.string())
    assert table.schema.field("meta").type == pa.struct([("k", pa.int64())])
    assert not table.schema.field("meta").metadata
    assert table.column("meta").to_pylist() == [{"k": 1}, {"k": 2}]


# ------------------------------------------------------------ the property
def _valid_rows(draw, n):
    ids = draw(st.lists(st.sampled_from(["d1", "d2", "n1", "n2", "n3", "n4", "n5"]), min_size=n, max_size=n))
    text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
    rows = []
    for i in range(n):
        rows.append(dict(
            id=ids[i], title=draw(text), brand=draw(text), category=draw(st.none() | text),
            price=draw(st.integers(-2 ** 63, 2 ** 63 - 1)),
            rating=draw(st.floats(allow_nan=False, allow_infinity=False)),
            flag=draw(st.booleans()),
            meta=draw(st.none() | st.integers(-10 ** 30, 10 ** 30) | text | st.lists(st.integers() | text, max_size=2)
                      | st.dictionaries(text, st.integers(), max_size=2)),
            tags=draw(st.lists(text | st.integers(-5, 5), max_size=2)),
            embedding=draw(st.none() | st.lists(st.integers(-64, 64).map(lambda x: x / 8), min_size=4, max_size=4)
                           .filter(any))))
    return rows


def _container(draw, name, values):
    """One column in a form extend_columns reads (list, tuple, numpy; a generator is chosen apart)."""
    form = draw(st.sampled_from(["list", "tuple", "numpy"]))
    if form == "tuple":
        return tuple(values)
    if form == "numpy":
        if name == "embedding" and all(v is not None for v in values):
            return np.array(values, dtype=draw(st.sampled_from([np.float32, np.float64]))).reshape(len(values), 4)
        if name in ("price", "rating", "flag"):
            return np.array(values, dtype={"price": np.int64, "rating": np.float64, "flag": np.bool_}[name])
        arr = np.empty(len(values), dtype=object)
        arr[:] = [np.array(v) if name == "embedding" and v is not None else v for v in values]
        return arr
    return list(values)


HOSTILE = ["length", "2d", "object", "nan", "inf", "huge int", "huge float", "str for number", "bool for number",
           "scalar", "str column", "set", "missing required", "unknown", "duplicate", "vector lists",
           "vector 2d wrong dim", "vector fixed list", "vector nan", "surrogate", "none required", "longdouble"]


def _mutate(draw, cols: dict, kind: str, n: int) -> Optional[str]:
    """One hostile change of `kind` to cols (in place); the name to give twice, for "duplicate"."""
    present = sorted(k for k in cols if _is_column(cols[k]) and len(cols[k]) == n)
    if not present:
        return None
    field = draw(st.sampled_from(present))
    if kind == "length":
        cols[field] = list(cols[field])[:-1] if n and draw(st.booleans()) else list(cols[field]) + [None]
    elif kind == "2d":
        cols[field] = np.array([[v, v] for v in cols[field]] if n else np.empty((0, 2)), dtype=object)
        if field in ("price", "rating") and n:
            cols[field] = cols[field].astype(np.float64 if field == "rating" else np.int64)
    elif kind == "object":
        arr = np.empty(n, dtype=object)
        arr[:] = [np.asarray(v) if field == "embedding" and v is not None else v for v in cols[field]]
        cols[field] = arr
    elif kind in ("nan", "inf", "longdouble") and n:
        bad = {"nan": np.nan, "inf": -np.inf, "longdouble": np.longdouble("1e400")}[kind]
        dtype = np.longdouble if kind == "longdouble" else np.float64
        i = draw(st.integers(0, n - 1))
        if draw(st.booleans()):
            try:
                arr = np.array(_vals(cols, "rating", n, 0.0), dtype=dtype)
            except OverflowError:  # a drawn rating is an int beyond float64: no column to spoil
                assume(False)
            arr[i] = bad
            cols["rating"] = arr
        else:
            rows = [list(v) if isinstance(v, (list, tuple, np.ndarray)) and len(v) == 4 else [1.0, 0, 0, 0]
                    for v in _vals(cols, "embedding", n, None)]
            rows[i][draw(st.integers(0, 3))] = bad
            cols["embedding"] = np.array(rows, dtype=dtype)
    elif kind in ("huge int", "huge float") and n:
        f = "price" if kind == "huge int" else "rating"
        vals = _vals(cols, f, n, 0)
        vals[draw(st.integers(0, n - 1))] = draw(st.sampled_from([10 ** 400, -(10 ** 400), 2 ** 64, -(2 ** 63) - 1]))
        cols[f] = vals
    elif kind in ("str for number", "bool for number") and n:
        f = draw(st.sampled_from(["price", "rating", "flag", "embedding"]))
        # an earlier mutation may have left a scalar (a bool, a str) where a vector goes: kept as is
        vals = [list(v) if f == "embedding" and isinstance(v, (list, tuple, np.ndarray)) else v
                for v in _vals(cols, f, n, None)]
        i = draw(st.integers(0, n - 1))
        bad = "1" if kind == "str for number" else True
        if f == "embedding":
            vals[i] = [bad, 1.0, 0, 0] if draw(st.booleans()) else bad
        else:
            vals[i] = "true" if f == "flag" else bad
        cols[f] = vals
    elif kind == "scalar":
        cols[field] = draw(st.sampled_from([5, 2.5, None, True, np.float64(1.0), "s"]))
    elif kind == "str column":
        cols[field] = "ab"[:n] if n else "x"
    elif kind == "set":
        cols[field] = set(range(n))
    elif kind == "missing required":
        cols.pop("brand", None)
    elif kind == "unknown":
        cols[draw(st.sampled_from(["colour", "Price", "", "embedding "]))] = [1] * n
    elif kind == "duplicate":
        return field if field in cols else None
    elif kind == "vector lists":
        cols["embedding"] = [list(v) if isinstance(v, (list, tuple, np.ndarray)) else v
                             for v in _vals(cols, "embedding", n, None)]
    elif kind == "vector 2d wrong dim":
        cols["embedding"] = np.ones((n, draw(st.sampled_from([0, 3, 5]))), dtype=np.float32)
    elif kind == "vector fixed list":
        cols["embedding"] = "fixed"  # a FixedSizeList column in Arrow (_frame), a string column elsewhere
    elif kind == "vector nan" and n:
        cols["embedding"] = np.full((n, 4), np.nan)
    elif kind == "surrogate" and n:
        f = draw(st.sampled_from(["id", "title", "brand", "category", "meta", "tags"]))
        vals = _vals(cols, f, n, "")
        vals[draw(st.integers(0, n - 1))] = "a\ud800" if f != "tags" else ["\udfff"]
        cols[f] = vals
    elif kind == "none required" and n:
        f = draw(st.sampled_from(["id", "brand", "price", "flag", "title"]))
        vals = _vals(cols, f, n, 0)
        vals[draw(st.integers(0, n - 1))] = None
        cols[f] = vals
    return None


def _is_column(v) -> bool:
    return isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim >= 1)


def _vals(cols: dict, f: str, n: int, fill) -> list:
    """Column f's values as a list to change one of (n times `fill` when it is no column of n)."""
    v = cols.get(f)
    return list(v) if _is_column(v) and len(v) == n else [fill] * n


def _frame(fmt, cols: dict, dup: Optional[str]):
    """cols as a DataFrame, an Arrow Table or RecordBatch (dup: one name given twice), or None
    when they are not columns of one length (pandas would broadcast or pad them)."""
    if not all(_is_column(v) or (k == "embedding" and v == "fixed") for k, v in cols.items()):
        return None
    n = len(cols["id"]) if "id" in cols else 0
    if any(len(v) != n for k, v in cols.items() if not isinstance(v, str)):
        return None
    names = list(cols) + ([dup] if dup else [])
    try:
        if fmt == "pandas":
            if isinstance(cols.get("embedding"), str):
                return None
            series = [pd.Series(list(cols[k]), dtype=object) if k == "embedding"
                      else pd.Series(cols[k]) if isinstance(cols[k], np.ndarray) and cols[k].dtype != object
                      else pd.Series(list(cols[k])) for k in names]
            frame = pd.concat(series, axis=1, ignore_index=True) if series else pd.DataFrame()
            frame.columns = names
            return frame
        arrays = []
        for k in names:
            v = cols[k]
            if isinstance(v, str):
                v = pa.FixedSizeListArray.from_arrays(pa.array(np.ones(n * 4, dtype=np.float32)), 4)
            elif isinstance(v, np.ndarray) and v.ndim == 2 and v.dtype != object:
                v = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), v.shape[1])
            elif isinstance(v, np.ndarray) and v.dtype != object:
                v = pa.array(v)
            else:
                v = pa.array(list(v))
            arrays.append(v)
        make = pa.Table.from_arrays if fmt == "arrow" else pa.RecordBatch.from_arrays
        return make(arrays, names=names)
    except Exception:  # pandas / Arrow cannot hold these values: not a call extend_columns can get
        return None


def _source(fmt, payload, lists: dict) -> dict:
    """name -> the column's values as the container itself reads them (pandas' and Arrow's own
    conversions, not hybridsearch's), the ground the model's rows are built from."""
    if fmt == "pandas":
        return {name: payload.iloc[:, j].tolist() for j, name in enumerate(payload.columns)}
    if fmt in ("arrow", "batch"):
        return {name: payload.column(j).to_pylist() for j, name in enumerate(payload.column_names)}
    return lists


OPTIONAL = ("category", "meta", "embedding")


def _rows_of(cols: dict) -> Optional[list]:
    """The rows the columns hold, as the documents `extend` is given (None or NaN in a list or
    object column: a missing value, as docs/usage.md says), or None when they hold no rows (then
    only a refusal is right)."""
    if not all(_is_column(v) for v in cols.values()):
        return None
    if any(isinstance(v, np.ndarray) and v.ndim != (2 if k == "embedding" and v.dtype != object else 1)
           for k, v in cols.items()):
        return None
    lengths = {len(v) for v in cols.values()}
    if len(lengths) > 1:
        return None
    rows = []
    for i in range(lengths.pop() if lengths else 0):
        row = {}
        for k, v in cols.items():
            x = v[i]
            if isinstance(x, np.generic):
                x = x.item()
            if isinstance(x, float) and x != x and (not isinstance(v, np.ndarray) or v.dtype == object):
                x = None
            if x is None and k not in OPTIONAL:
                return None  # a required value missing
            row[k] = x
        rows.append(row)
    return rows


def _model_or_none(rows: list) -> Optional[tuple]:
    try:
        return _model_state(rows)
    except hs.SchemaError:
        return None


@st.composite
def hostile_calls(draw):
    n = draw(st.integers(0, 4))
    rows = _valid_rows(draw, n)
    names = [f for f in FIELDS if f in ("id", "brand") or draw(st.booleans())]
    cols = {f: _container(draw, f, [r[f] for r in rows]) for f in names}
    dup = None
    for kind in draw(st.lists(st.sampled_from(HOSTILE), max_size=2)):
        dup = _mutate(draw, cols, kind, n) or dup
    gens = {k for k in cols if _is_column(cols[k]) and draw(st.integers(0, 4)) == 0}  # given as generators
    return draw(st.sampled_from(["dict", "dict", "pandas", "arrow", "batch"])), cols, dup, gens


def _reset(make_da):
    """The test's one collection (opening Qdrant takes a second or two), holding START alone again."""
    da = getattr(make_da, "hostile_da", None)
    if da is None:
        da = make_da.hostile_da = make_da(Row)
    ids = da.to_columns(["id"])["id"]
    if ids:
        da.delete(ids)
    da.extend(START)
    return da


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(call=hostile_calls())
def test_hostile_columns_are_refused_unchanged_or_equal_the_documents(make_da, storage, call):
    fmt, lists, dup, gens = call
    payload = _frame(fmt, lists, dup) if fmt != "dict" else None
    if payload is None:  # as a dict of columns, some given as generators (read once)
        fmt, dup = "dict", None
        lists = {k: (list(v) if k in gens else v) for k, v in lists.items()}  # what a generator yields
        payload = {k: ((x for x in v) if k in gens else v) for k, v in lists.items()}
    da = _reset(make_da)
    before = state(da)
    try:
        da.extend_columns(payload)
    except hs.SchemaError as e:
        event(f"{fmt}: refused")
        assert "nothing was written" in str(e), str(e)
        assert state(da) == before
        return
    event(f"{fmt}: accepted")
    # accepted: the same rows written as documents give the same collection
    assert dup is None, "a duplicate column name was accepted"
    rows = _rows_of(_source(fmt, payload, lists))
    assert rows is not None, f"columns holding no rows were accepted: {lists!r}"
    got = state(da)
    model = _model_or_none(rows)
    assert model is not None, f"extend_columns accepted rows extend refuses: {rows!r}"
    assert got == model
    # what was accepted goes out and back in through pandas and Arrow unchanged
    for out in (da.to_arrow(), da.to_pandas()):
        other = hs.DocumentArray(Row, storage="memory")
        other.extend_columns(out)
        assert state(other) == got


# ------------------------------------------------------------------ numpy masked arrays
def test_a_masked_array_reads_its_masked_rows_as_missing(opened, storage):
    """A masked entry of a numpy masked array is a missing value, as None in a list is: an
    optional field takes None, a required one refuses the call (row 0). (Before, the memory
    storages wrote the hidden value under the mask and qdrant the field's default: the same
    call stored different documents on different storages.)"""
    cat = np.ma.masked_array(["a", "b"], mask=[True, False])
    da = opened()
    da.extend(START)
    da.extend_columns(_two(category=cat))
    assert state(da) == _model_state([dict(id="d1", brand="x", price=99, category=None),
                                      dict(id="d9", brand="y", price=98, category="b")])
    da.close()
    _refused_and_unchanged(lambda: opened(1), storage,
                           lambda: _two(price=np.ma.masked_array([99, 98], mask=[True, False])),
                           "price", "row 0", "missing")
