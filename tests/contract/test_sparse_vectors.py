"""hs.SparseVector fields (API.md section 10, issue 30 item 2): the value rules at the schema
(SchemaError naming the field and the entry at fault), the dict read-back, the JSON round trip,
and the refusal of every storage that does not hold sparse vectors.

Public API only."""
import json

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import STORAGES


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


def test_the_entry_limit_counts_nonzero_entries_only():
    n = 65_536
    assert len(Sparse(splade=(np.arange(n + 10), np.r_[np.ones(n), np.zeros(10)])).splade) == n


# every storage that does not hold sparse vectors refuses the schema at open, naming the kind
REFUSING = [s for s in ("hnswlib", "annlite", "qdrant", "qdrant-client") if s in STORAGES]


@pytest.mark.parametrize("kind", REFUSING)
def test_storages_without_sparse_vectors_refuse_the_schema_at_open(kind, tmp_path):
    opts = {"url": ":memory:"} if kind == "qdrant-client" else {"path": tmp_path / "a"} if kind == "annlite" else {}
    name = "qdrant" if kind.startswith("qdrant") else kind
    with pytest.raises(hs.UnsupportedError, match=f"storage '{name}' does not hold hs.SparseVector fields "
                                                   r"\(Sparse.splade is one\)"):
        hs.DocumentArray(Sparse, storage=name, **opts)


def test_remote_storages_refuse_sparse_vectors_before_connecting():
    """The refusal comes at open, from the storage's description, not from a node (none runs)."""
    for kind, opts in (("elasticsearch", {"hosts": "http://127.0.0.1:9", "index": "x"}),
                       ("opensearch", {"hosts": "http://127.0.0.1:9", "index": "x"}),
                       ("weaviate", {"url": "http://127.0.0.1:9"}),
                       ("vespa", {"url": "http://127.0.0.1:9"})):
        try:
            with pytest.raises(hs.UnsupportedError, match=f"storage '{kind}' does not hold hs.SparseVector"):
                hs.DocumentArray(Sparse, storage=kind, **opts)
        except hs.ConfigError as e:  # its client is not installed here, or it takes other options
            pytest.skip(str(e))
