"""The three framework stores (LangChain, LlamaIndex, Haystack) declare, check and adopt their
collections alike (hybridsearch/integrations/collection.py): the same names refused, the same
declared types accepted, the same values refused with hs.SchemaError and nothing written, an
open collection adopted the same way. Each case runs on every store through its public API;
the expected answers come from a plain Python model of the stored metadata."""
from __future__ import annotations

import math

import pytest

pytest.importorskip("langchain_core", reason='needs the extra "langchain": pip install "hybridsearch[langchain]"')
pytest.importorskip("llama_index.core", reason='needs the extra "llamaindex": pip install "hybridsearch[llamaindex]"')
pytest.importorskip("haystack", reason='needs the extra "haystack": pip install "hybridsearch[haystack]"')

from haystack.dataclasses import Document as HaystackDocument  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters  # noqa: E402

import hybridsearch as hs  # noqa: E402
from hybridsearch.integrations.haystack import HybridSearchDocumentStore  # noqa: E402
from hybridsearch.integrations.langchain import HybridSearchVectorStore as LangChainStore  # noqa: E402
from hybridsearch.integrations.llamaindex import HybridSearchVectorStore as LlamaIndexStore  # noqa: E402

DIM = 4


def vector(i: int) -> list:
    return [1.0 + i, 0.5, 0.25, 0.125]


class LangChain:
    """The LangChain store through its public API."""

    def open(self, metadata_fields=None, **options):
        return LangChainStore(DeterministicFakeEmbedding(size=DIM), dimension=DIM, metadata_fields=metadata_fields,
                              **options)

    def adopt(self, da, **options):
        return LangChainStore(DeterministicFakeEmbedding(size=DIM), collection=da, **options)

    def array(self, store):
        return store.collection

    def write(self, store, docs):
        store.add_texts([f"text {i}" for i, _ in docs], [m for _, m in docs], ids=[i for i, _ in docs])

    def ids(self, store, key=None, value=None):
        flt = None if key is None else {key: value}
        return {d.id for d in store.similarity_search_by_vector(vector(0), k=1000, filter=flt)}


class LlamaIndex:
    """The LlamaIndex store through its public API."""

    def open(self, metadata_fields=None, **options):
        return LlamaIndexStore(options.pop("storage", "memory"), metadata_fields=metadata_fields, embed_dim=DIM,
                               **options)

    def adopt(self, da, dimension=None, **options):
        return LlamaIndexStore(da, embed_dim=dimension, **options)

    def array(self, store):
        return store.client

    def write(self, store, docs):
        store.add([TextNode(id_=i, text=f"text {i}", embedding=vector(n), metadata=m)
                   for n, (i, m) in enumerate(docs)])

    def ids(self, store, key=None, value=None):
        filters = None if key is None else MetadataFilters(filters=[MetadataFilter(key=key, value=value)])
        return {n.node_id for n in store.get_nodes(filters=filters)}


class Haystack:
    """The Haystack store through its public API."""

    def open(self, metadata_fields=None, **options):
        return HybridSearchDocumentStore(options.pop("storage", "memory"), embedding_dim=DIM,
                                         metadata_fields=metadata_fields, **options)

    def adopt(self, da, **options):
        return HybridSearchDocumentStore(da, **options)

    def array(self, store):
        return store.document_array

    def write(self, store, docs):
        store.write_documents([HaystackDocument(id=i, content=f"text {i}", meta=m, embedding=vector(n))
                               for n, (i, m) in enumerate(docs)])

    def ids(self, store, key=None, value=None):
        flt = None if key is None else {"field": f"meta.{key}", "operator": "==", "value": value}
        return {d.id for d in store.filter_documents(flt)}


FRAMEWORKS = [LangChain(), LlamaIndex(), Haystack()]
NAMES = ["langchain", "llamaindex", "haystack"]


def same(a, b) -> bool:
    """hybridsearch's equality of metadata values: of one kind (bool, number, str) and equal."""
    def kind(v):
        return "bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else type(v).__name__
    return a is not None and kind(a) == kind(b) and a == b


def model_ids(docs, key, value) -> set:
    return {i for i, m in docs if same(m.get(key), value)}


@pytest.fixture(params=FRAMEWORKS, ids=NAMES)
def fw(request):
    return request.param


@pytest.mark.parametrize("name", ["json", "copy", "model_config", "model_fields"])
def test_a_pydantic_model_attribute_cannot_be_declared(fw, name):
    """A column named like a model attribute would shadow it: ConfigError in every store."""
    with pytest.raises(hs.ConfigError, match="pydantic model attribute"):
        fw.open({name: int})


def test_type_names_declare_as_the_types_do(fw):
    """{"year": "int"} (what a serialised store holds) declares the column {"year": int} does."""
    store = fw.open({"year": "int", "genre": "str"})
    docs = [("a", {"year": 1990, "genre": "jazz"}), ("b", {"year": 1991, "genre": "rock"})]
    fw.write(store, docs)
    with pytest.raises(hs.SchemaError, match="'year' is declared int"):
        fw.write(store, [("c", {"year": "1992"})])
    assert fw.ids(store, "year", 1990) == model_ids(docs, "year", 1990) == {"a"}
    assert fw.ids(store) == {"a", "b"}


# (declared type, a value its column cannot hold as the metadata holds it)
REFUSED = [(int, 2.0), (int, True), (float, 2 ** 53 + 1), (float, -(2 ** 60)), (float, True), (float, math.nan),
           (float, math.inf), (bool, 1), (str, 3)]


@pytest.mark.parametrize("declared,value", REFUSED, ids=[f"{t.__name__}-{v!r}" for t, v in REFUSED])
def test_a_declared_value_of_another_type_writes_nothing(fw, declared, value):
    """A typed SchemaError naming the key, and nothing of the batch written: an int beyond 2**53
    in a float column (which would round it, so a filter on the column would answer for another
    number) and a float in an int column included."""
    store = fw.open({"x": declared})
    fw.write(store, [("kept", {})])
    with pytest.raises(hs.SchemaError, match="'x'"):
        fw.write(store, [("fine", {"x": None}), ("bad", {"x": value})])
    assert fw.ids(store) == {"kept"}


@pytest.mark.parametrize("declared,value", [(float, 2 ** 53), (float, 3), (int, -(2 ** 62)), (str, "3"),
                                            (float, -0.5)])
def test_a_declared_value_that_fits_is_filtered_exactly(fw, declared, value):
    store = fw.open({"x": declared})
    docs = [("a", {"x": value}), ("b", {"x": None}), ("c", {})]
    fw.write(store, docs)
    assert fw.ids(store, "x", value) == model_ids(docs, "x", value) == {"a"}


def test_an_open_collection_is_adopted_with_its_columns(fw):
    """Wrapping the DocumentArray of a store without naming metadata_fields adopts its declared
    columns; naming other ones is a ConfigError."""
    first = fw.open({"genre": str, "year": int})
    docs = [("a", {"genre": "jazz", "year": 1990}), ("b", {"genre": "rock", "year": 1990})]
    fw.write(first, docs)
    da = fw.array(first)
    again = fw.adopt(da)
    assert fw.ids(again, "genre", "jazz") == model_ids(docs, "genre", "jazz") == {"a"}
    fw.write(again, [("c", {"genre": "jazz"})])
    with pytest.raises(hs.SchemaError, match="'year' is declared int"):
        fw.write(again, [("d", {"year": "1990"})])
    assert fw.ids(first) == {"a", "b", "c"}
    with pytest.raises(hs.ConfigError, match="metadata_fields"):
        fw.adopt(da, metadata_fields={"genre": str})


@pytest.mark.parametrize("fw", FRAMEWORKS[:2], ids=NAMES[:2])
def test_an_open_collection_of_another_dimension_is_refused(fw):
    """A dimension given beside an open collection that has another one is a ConfigError, not
    silently replaced (Haystack's embedding_dim has a default, 768, so it cannot tell)."""
    da = fw.array(fw.open({"genre": str}))
    with pytest.raises(hs.ConfigError, match="dimension"):
        fw.adopt(da, dimension=DIM + 1, metadata_fields={"genre": str})


def test_a_path_store_reopens_with_metadata_fields_in_another_order(fw, tmp_path):
    """The stored schema does not depend on the order of the metadata_fields dict."""
    path = str(tmp_path / "store.db")
    store = fw.open({"genre": str, "year": int}, storage="sqlite", path=path)
    docs = [("a", {"genre": "jazz", "year": 1990}), ("b", {"genre": "rock", "year": 1991})]
    fw.write(store, docs)
    fw.array(store).close()
    again = fw.open({"year": int, "genre": str}, storage="sqlite", path=path)
    try:
        assert fw.ids(again, "year", 1991) == model_ids(docs, "year", 1991) == {"b"}
    finally:
        fw.array(again).close()


def test_haystack_update_by_filter_checks_declared_values():
    """update_by_filter writes declared columns as write_documents does: a value the column
    cannot hold is a SchemaError and nothing is updated."""
    store = HybridSearchDocumentStore("memory", embedding_dim=DIM, metadata_fields={"x": float})
    store.write_documents([HaystackDocument(id="a", content="one", meta={"x": 1.5})])
    with pytest.raises(hs.SchemaError, match="'x'"):
        store.update_by_filter({"field": "meta.x", "operator": "==", "value": 1.5}, {"x": 2 ** 60 + 1})
    assert [d.meta for d in store.filter_documents()] == [{"x": 1.5}]
