"""Regressions of a review of the three framework stores (LangChain, LlamaIndex, Haystack):
the lazy first open of the LlamaIndex store under threads, a str where a list of ids is
expected, reserved metadata names, declared vs undeclared LangChain filters, natural-language
queries, relevance scores, LlamaIndex to_dict, LangChain keyword clashes. Public API only; each
answer is checked against a plain Python model of what the store holds."""
import threading
import uuid

import pytest

pytest.importorskip("langchain_core", reason='needs the integrations extra: pip install "hybridsearch[integrations]"')
pytest.importorskip("llama_index.core", reason='needs the integrations extra: pip install "hybridsearch[integrations]"')
pytest.importorskip("haystack", reason='needs the integrations extra: pip install "hybridsearch[integrations]"')

from haystack import Document as HSDocument  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

import hybridsearch as hs  # noqa: E402
from hybridsearch.errors import IdError  # noqa: E402
from hybridsearch.integrations.haystack import HybridSearchDocumentStore  # noqa: E402
from hybridsearch.integrations.langchain import HybridSearchVectorStore as LCStore  # noqa: E402
from hybridsearch.integrations.llamaindex import HybridSearchVectorStore as LIStore  # noqa: E402


def li_options(storage: str, tmp_path) -> dict:
    return {"path": str(tmp_path / f"li-{uuid.uuid4().hex}.db")} if storage == "sqlite" else {}


# --- 1. the LlamaIndex store's lazy first open, from many threads at once ------------------------
@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_llamaindex_first_adds_from_many_threads_keep_every_node(storage, tmp_path):
    threads_n = 8
    for trial in range(5):
        store = LIStore(storage, **li_options(storage, tmp_path))
        barrier, errors = threading.Barrier(threads_n), []

        def first_add(k: int) -> None:
            barrier.wait()
            try:
                store.add([TextNode(id_=f"t{k}", text=f"node {k}", embedding=[1.0, float(k)])])
            except Exception as e:  # the test fails below, naming it
                errors.append(e)

        threads = [threading.Thread(target=first_add, args=(k,)) for k in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            assert errors == []
            assert sorted(n.node_id for n in store.get_nodes()) == sorted(f"t{k}" for k in range(threads_n))
        finally:
            store.close()


# --- 2. a str where a list of ids is expected: one id, in all three stores -----------------------
IDS = ["ab", "a", "b"]


def test_langchain_a_str_of_ids_is_one_id():
    store = LCStore(DeterministicFakeEmbedding(size=4), dimension=4)
    store.add_texts(["x", "y", "z"], ids=IDS)
    assert [d.id for d in store.get_by_ids("ab")] == ["ab"]
    store.delete("ab")
    assert sorted(store.collection.to_columns(fields=["id"])["id"]) == ["a", "b"]
    with pytest.raises(IdError, match="ids are strings"):
        store.delete(b"a")
    with pytest.raises(IdError, match="ids are strings"):
        store.get_by_ids([3])
    assert sorted(store.collection.to_columns(fields=["id"])["id"]) == ["a", "b"]


def test_llamaindex_a_str_of_node_ids_is_one_id():
    store = LIStore("memory")
    store.add([TextNode(id_=i, text=i, embedding=[1.0, 0.0]) for i in IDS])
    assert [n.node_id for n in store.get_nodes("ab")] == ["ab"]
    store.delete_nodes("ab")
    assert sorted(n.node_id for n in store.get_nodes()) == ["a", "b"]
    with pytest.raises(IdError, match="ids are strings"):
        store.delete_nodes(b"a")
    assert sorted(n.node_id for n in store.get_nodes()) == ["a", "b"]


def test_haystack_a_str_of_ids_is_one_id():
    store = HybridSearchDocumentStore("memory", embedding_dim=2)
    store.write_documents([HSDocument(id=i, content=i) for i in IDS])
    store.delete_documents("ab")
    assert sorted(d.id for d in store.filter_documents()) == ["a", "b"]
    with pytest.raises(IdError, match="ids are strings"):
        store.delete_documents(b"a")
    assert sorted(d.id for d in store.filter_documents()) == ["a", "b"]


# --- 3. LlamaIndex: metadata keys node_to_metadata_dict writes itself cannot be declared ---------
@pytest.mark.parametrize("key", ["doc_id", "document_id", "ref_doc_id", "_node_content", "_node_type"])
def test_llamaindex_refuses_declaring_keys_llamaindex_writes(key):
    with pytest.raises(hs.ConfigError, match=repr(key)):
        LIStore("memory", metadata_fields={key: str})


def test_llamaindex_refuses_adopting_a_column_llamaindex_writes():
    import typing
    schema = type("Nodes", (hs.Document,), {"__annotations__": {
        "text": hs.Text, "embedding": hs.Vector[2], "ref_doc_id": typing.Optional[hs.Keyword], "metadata": dict,
        "doc_id": typing.Optional[hs.Keyword]}, "text": "", "ref_doc_id": None, "metadata": {}, "doc_id": None})
    da = hs.DocumentArray(schema, storage="memory")
    try:
        with pytest.raises(hs.ConfigError, match="doc_id"):
            LIStore(da)
    finally:
        da.close()
