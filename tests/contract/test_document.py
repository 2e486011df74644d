"""Schema: field kinds, validation and errors (API.md sections 1 and 6). How a Document class
maps to field kinds (the Schema storages read) is checked in tests/engine/test_query.py."""
from typing import Annotated, Optional

import numpy as np
import pytest

import hybridsearch as hs


class Product(hs.Document):
    title: hs.Text
    description: Annotated[hs.Text, hs.Analyzer(stemmer=None)] = ""
    category: hs.Keyword
    brand: Optional[hs.Keyword] = None
    price: int = 0
    average_rating: float = 0.0
    in_stock: bool = True
    embedding: hs.Vector[3]
    meta: dict = {}


def make(**kw):
    base = dict(title="t", category="c", embedding=[1, 2, 3])
    base.update(kw)
    return Product(**base)


def test_default_id_is_random_32_hex():
    a, b = make(), make()
    assert len(a.id) == 32 and int(a.id, 16) >= 0
    assert a.id != b.id


@pytest.mark.parametrize("value", [[1, 2, 3], (1, 2, 3), np.array([1, 2, 3], dtype=np.float64)])
def test_vector_accepts_list_tuple_ndarray_and_stores_float32(value):
    p = make(embedding=value)
    assert p.embedding.dtype == np.float32 and p.embedding.flags.c_contiguous
    np.testing.assert_array_equal(p.embedding, [1, 2, 3])


def test_vector_is_copied_from_the_input():
    src = np.array([1, 2, 3], dtype=np.float32)
    p = make(embedding=src)
    src[0] = 99
    assert p.embedding[0] == 1


@pytest.mark.parametrize(
    "kw, fragment",
    [
        (dict(embedding=[1, 2]), "embedding: expected 3 dimensions, got 2"),
        (dict(embedding=[1, 2, float("nan")]), "embedding: contains NaN or inf"),
        (dict(embedding=[1, 2, float("inf")]), "embedding: contains NaN or inf"),
        (dict(embedding="abc"), "embedding"),
        (dict(price="12"), "price"),
        (dict(price=True), "price"),
        (dict(price=1.5), "price"),
        (dict(price=2**70), "price"),
        (dict(average_rating=float("nan")), "average_rating"),
        (dict(in_stock=1), "in_stock"),
        (dict(title=3), "title"),
        (dict(category=None), "category"),
        (dict(prce=3), "prce: unknown field"),
        (dict(id=""), "id"),
    ],
)
def test_bad_values_raise_schema_error_naming_the_field(kw, fragment):
    with pytest.raises(hs.SchemaError, match=fragment.replace("(", r"\(")) as e:
        make(**kw)
    assert isinstance(e.value, ValueError) and isinstance(e.value, hs.HybridSearchError)


def test_missing_required_field():
    with pytest.raises(hs.SchemaError, match="Product.title: required field is missing"):
        Product(category="c", embedding=[1, 2, 3])


def test_dict_validation_goes_through_model_validate():
    p = Product.model_validate({"title": "t", "category": "c", "embedding": [0, 0, 1], "price": np.int64(5)})
    assert p.price == 5
    with pytest.raises(hs.SchemaError):
        Product.model_validate({"title": "t", "category": "c", "embedding": [0, 1]})


def test_several_vector_fields_are_declared_each_with_its_dimension():
    """API.md section 10 (third edition): any number of hs.Vector fields; each validates its own
    dimension (the first and second editions allowed one)."""
    class Two(hs.Document):
        a: hs.Vector[2]
        b: hs.Vector[3]

    assert Two(a=[1, 2], b=[1, 2, 3]).b.shape == (3,)
    with pytest.raises(hs.SchemaError, match="b"):
        Two(a=[1, 2], b=[1, 2])


def test_vector_needs_a_positive_dimension():
    with pytest.raises(hs.SchemaError):
        hs.Vector[0]
    with pytest.raises(hs.SchemaError):
        hs.Vector["3"]
    assert hs.Vector[5] is hs.Vector[5]
