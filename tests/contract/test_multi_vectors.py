"""hs.MultiVector[d] fields (API.md section 10, issue 30 item 3): the value rules at the schema
(SchemaError naming the field: shape, 1..4096 tokens, the dense rules per row), the float32
read-back, and the refusal of every storage that does not hold multi-vectors.

Public API only."""
from typing import Optional

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import STORAGES


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


# every storage that does not hold multi-vectors refuses the schema at open, naming the kind
REFUSING = [s for s in ("hnswlib", "annlite", "qdrant", "qdrant-client") if s in STORAGES]


@pytest.mark.parametrize("kind", REFUSING)
def test_storages_without_multi_vectors_refuse_the_schema_at_open(kind, tmp_path):
    opts = {"url": ":memory:"} if kind == "qdrant-client" else {"path": tmp_path / "a"} if kind == "annlite" else {}
    name = "qdrant" if kind.startswith("qdrant") else kind
    with pytest.raises(hs.UnsupportedError, match=f"storage '{name}' does not hold hs.MultiVector fields "
                                                   r"\(Multi.colbert is one\)"):
        hs.DocumentArray(Multi, storage=name, **opts)


def test_remote_storages_refuse_multi_vectors_before_connecting():
    """The refusal comes at open, from the storage's description, not from a node (none runs)."""
    for kind, opts in (("elasticsearch", {"hosts": "http://127.0.0.1:9", "index": "x"}),
                       ("opensearch", {"hosts": "http://127.0.0.1:9", "index": "x"}),
                       ("weaviate", {"url": "http://127.0.0.1:9"}),
                       ("vespa", {"url": "http://127.0.0.1:9"})):
        try:
            with pytest.raises(hs.UnsupportedError, match=f"storage '{kind}' does not hold hs.MultiVector"):
                hs.DocumentArray(Multi, storage=kind, **opts)
        except hs.ConfigError as e:  # its client is not installed here, or it takes other options
            pytest.skip(str(e))
