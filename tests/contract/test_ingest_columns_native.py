"""extend_columns' native builder (ids and keyword columns, engine/strings.py and
kernels/hs_ingest.c) against a plain Python model of the semantics, through the public API.

Ids and keywords are drawn from a small alphabet of hostile strings (unicode, NUL, emoji,
lone surrogates, the empty string) so batches repeat ids within themselves and against the
stored ones, beside values that are no str at all. The model: a batch is refused whole
(SchemaError) when any row is bad, and changes nothing; otherwise every row is written in
order, a repeated id keeping its first position and its last row, as a dict does. After
every batch, and after a close and reopen with path=, the collection must equal the model:
ids in order, each field's values, membership, keyword filter counts.
"""
from typing import Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch.errors import SchemaError


class Row(hs.Document):
    v: hs.Vector[3]
    kw: hs.Keyword = ""
    okw: Optional[hs.Keyword] = None


# a small alphabet: draws repeat, within a batch and across batches
_CHARS = st.sampled_from(["a", "b", "\x00", "é", "日", "😀", " "])
_ID = st.text(alphabet=_CHARS, min_size=1, max_size=3)
_KW = st.text(alphabet=_CHARS, max_size=3)
# exact in float32, and no norm near the refused ones below 1e-15 (not what this file tests)
_COORD = st.sampled_from([0.0, 0.5, -1.0, 1.5, 2.0, -0.25])
# one bad cell per refused batch, so each kind of refusal is the only reason (or none is)
_BAD = {"id": [None, 7, b"a", "", "a\ud800", 1.5, ["a"]],
        "kw": [None, 7, b"a", "\ud800", ["a"]],
        "okw": [7, b"a", "b\ud800", 2.5],
        "v": [np.nan, np.inf, -np.inf]}


def _bad_str(v, may_miss: bool) -> bool:
    """The model of a string cell's validity: an exact str with a UTF-8 form, or None where
    the field may miss it."""
    if v is None:
        return not may_miss
    if not isinstance(v, str):
        return True
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@st.composite
def _batch(draw):
    n = draw(st.integers(1, 6))
    ids = draw(st.lists(_ID, min_size=n, max_size=n))
    kw = draw(st.lists(_KW, min_size=n, max_size=n))
    okw = draw(st.lists(st.one_of(st.none(), _KW), min_size=n, max_size=n))
    vec = np.array(draw(st.lists(st.lists(_COORD, min_size=3, max_size=3),
                                 min_size=n, max_size=n)), dtype=np.float32)
    batch = {"id": ids, "kw": kw, "okw": okw, "v": vec}
    spoil = draw(st.sampled_from([None, None, "id", "kw", "okw", "v"]))
    if spoil is not None:
        row, bad = draw(st.integers(0, n - 1)), draw(st.sampled_from(_BAD[spoil]))
        if spoil == "v":
            vec[row, draw(st.integers(0, 2))] = bad
        else:
            batch[spoil][row] = bad
    return batch


def _model_apply(model: dict, batch: dict) -> bool:
    """Applies a batch to the model (id -> (kw, okw, vector)); False when it is refused."""
    ids, kw, okw, vec = batch["id"], batch["kw"], batch["okw"], batch["v"]
    if any(_bad_str(i, False) or i == "" for i in ids):
        return False
    if any(_bad_str(k, False) for k in kw) or any(_bad_str(k, True) for k in okw):
        return False
    if not np.isfinite(vec).all():
        return False
    for i, k, o, x in zip(ids, kw, okw, vec):
        model[i] = (k, o, x)
    return True


def _check_equal(da, model: dict) -> None:
    cols = da.to_columns()
    assert cols["id"] == list(model), (cols["id"], list(model))
    assert list(cols["kw"]) == [k for k, _, _ in model.values()]
    assert list(cols["okw"]) == [o for _, o, _ in model.values()]
    want = np.array([x for _, _, x in model.values()], dtype=np.float32).reshape(len(model), 3)
    np.testing.assert_array_equal(np.asarray(cols["v"], dtype=np.float32).reshape(len(model), 3), want)
    for i, (k, o, _) in model.items():
        assert i in da
        doc = da[i]
        assert (doc.id, doc.kw, doc.okw) == (i, k, o)
    # the keyword codes: a filter on each value finds exactly the model's documents with it
    for field, at in (("kw", 0), ("okw", 1)):
        for value in {t[at] for t in model.values()} - {None}:
            expect = [i for i, t in model.items() if t[at] == value]
            assert sorted(da.find(filter={field: value}, limit=None).ids) == sorted(expect), (field, value)


def _open(storage: str, path):
    return hs.DocumentArray(Row, storage=storage, path=path) if path is not None else \
        hs.DocumentArray(Row, storage=storage)


@pytest.mark.parametrize("storage", ["memory", "hnsw"])
@pytest.mark.parametrize("with_path", [False, True], ids=["ram", "path"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(_batch(), min_size=1, max_size=5), reopen_at=st.integers(0, 5))
def test_extend_columns_matches_the_model(storage, with_path, tmp_path_factory, batches, reopen_at):
    path = tmp_path_factory.mktemp("native") / "col" if with_path else None
    da = _open(storage, path)
    model: dict = {}
    try:
        for k, batch in enumerate(batches):
            before = dict(model)
            if _model_apply(model, batch):
                da.extend_columns(batch)
            else:
                with pytest.raises(SchemaError):
                    da.extend_columns(batch)
                assert model == before
            _check_equal(da, model)
            if with_path and k == reopen_at:  # a refused batch left nothing in the files either
                da.close()
                da = _open(storage, path)
                _check_equal(da, model)
        if with_path:
            da.close()
            da = _open(storage, path)
            _check_equal(da, model)
    finally:
        da.close()


@pytest.mark.parametrize("storage", ["memory", "hnsw"])
def test_a_thousand_ids_repeated_against_the_stored_ones(storage, rng):
    """Bigger batches than hypothesis draws (the native paths, not the one-by-one ones):
    half the ids of the second batch are stored, the third's are all new, the fourth's are
    half stored and a quarter repeat within it."""
    da = _open(storage, None)
    model: dict = {}
    n = 6000  # beyond the id map's small-batch path (a dict of recent ids): the sorted arrays answer
    first = {"id": [f"d{i}é" for i in range(n)], "kw": [f"k{i % 7}" for i in range(n)],
             "okw": [None if i % 3 else f"o{i % 5}" for i in range(n)],
             "v": rng.standard_normal((n, 3)).astype(np.float32)}
    second = {"id": [f"d{i}é" for i in range(n // 2, n // 2 + n)], "kw": [f"k{i % 11}" for i in range(n)],
              "okw": [f"o{i % 3}" for i in range(n)], "v": rng.standard_normal((n, 3)).astype(np.float32)}
    ids = [f"d{i}é" for i in range(n, 2 * n)]
    ids[::4] = ids[1::4]  # a quarter of the rows repeat the id of the row after them
    fourth = {"id": ids, "kw": [f"k{i % 13}" for i in range(n)], "okw": [None] * n,
              "v": rng.standard_normal((n, 3)).astype(np.float32)}
    third = {"id": [f"n{i}😀" for i in range(n)], "kw": ["\x00"] * n, "okw": [None] * n,  # every id new
             "v": rng.standard_normal((n, 3)).astype(np.float32)}
    for batch in (first, second, third, fourth):
        assert _model_apply(model, batch)
        da.extend_columns(batch)
        _check_equal(da, model)
    bad = dict(fourth, id=fourth["id"][:-1] + [7])  # one non-str id at the end: nothing written
    with pytest.raises(SchemaError):
        da.extend_columns(bad)
    _check_equal(da, model)
    da.close()


@pytest.mark.parametrize("storage", ["memory", "hnsw"])
def test_extend_of_documents_in_parts_matches_the_model(storage, rng, tmp_path):
    """extend() converts documents a part at a time (array.py _extend_in_parts): ids repeated
    across parts keep their first position and last values, a bad document in a late part
    names its position and leaves the collection (and its files) as they were."""
    n = 9000  # three parts
    ids = [f"x{i % 7000}\x00" for i in range(n)]  # the last 2000 repeat ids of the first part
    vecs = rng.standard_normal((n, 3)).astype(np.float32)
    docs = [Row(id=ids[i], v=vecs[i], kw=f"k{i % 9}", okw=None if i % 2 else "😀") for i in range(n)]
    model: dict = {}
    for d in docs:
        model[d.id] = (d.kw, d.okw, d.v)
    da = _open(storage, tmp_path / "col")
    da.extend(docs)
    _check_equal(da, model)
    bad = [{"id": f"y{i}", "v": [1.0, 0.0, 0.0]} for i in range(n)]
    bad[8500]["v"] = [float("nan"), 0.0, 0.0]
    with pytest.raises(SchemaError, match="document 8500"):
        da.extend(bad)
    _check_equal(da, model)
    da.close()
    da = _open(storage, tmp_path / "col")
    _check_equal(da, model)
    da.close()
