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


# --- 4. LangChain filters with wrongly typed values: declared and undeclared answer alike ---------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LC_FIELDS = {"year": int, "genre": str, "price": float, "flag": bool}
LC_ROWS = [("a", {"year": 1990, "genre": "jazz", "price": 1.5, "flag": True}),
           ("b", {"year": 2000, "genre": "rock", "price": 2, "flag": False}),
           ("c", {"genre": "jazz"}),
           ("d", {"year": None, "genre": None, "price": None, "flag": None}),
           ("e", {"year": 2010, "genre": "Jazz", "price": 3.0, "flag": True})]
ORDERED = ("$gt", "$gte", "$lt", "$lte")


def kind(v):
    return "bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else type(v).__name__


def model_ids(key, op, arg):
    """The ids the filter {key: {op: arg}} selects over LC_ROWS, or FilterError: None is no
    value; ordering takes numbers or strings and raises against a stored value of another kind;
    values of different kinds are never equal."""
    args = arg if op in ("$in", "$nin") else [arg]
    if any(a is None for a in args) or (op in ORDERED and kind(arg) not in ("number", "str")):
        return hs.FilterError
    out = []
    for i, meta in LC_ROWS:
        v = meta.get(key)
        eq = any(v is not None and kind(v) == kind(a) and v == a for a in args)
        if op in ORDERED:
            if v is None:
                continue
            if kind(v) != kind(arg):
                return hs.FilterError
            ok = {"$gt": v > arg, "$gte": v >= arg, "$lt": v < arg, "$lte": v <= arg}[op]
        else:
            ok = eq if op in ("$eq", "$in") else not eq
        if ok:
            out.append(i)
    return out


@pytest.fixture(scope="module")
def lc_pair():
    stores = []
    for fields in (LC_FIELDS, None):
        s = LCStore(DeterministicFakeEmbedding(size=4), dimension=4, metadata_fields=fields)
        s.add_texts([f"t {i}" for i, _ in LC_ROWS], [m for _, m in LC_ROWS], ids=[i for i, _ in LC_ROWS])
        stores.append(s)
    yield stores
    for s in stores:
        s.close()


def answer(store, flt):
    try:
        return sorted(d.id for d in store.similarity_search("t", k=10, filter=flt))
    except hs.FilterError:
        return hs.FilterError


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 2020), st.sampled_from([1.5, 2.0, 1990.0, 2.5]),
                    st.sampled_from(["jazz", "rock", "1990", "a", "Jazz"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(LC_FIELDS)), op=st.sampled_from(["$eq", "$ne", "$in", "$nin", *ORDERED]),
       arg=SCALARS, more=st.lists(SCALARS, max_size=2), implicit=st.booleans())
def test_langchain_wrongly_typed_filters_answer_alike_declared_or_not(lc_pair, key, op, arg, more, implicit):
    value = [arg, *more] if op in ("$in", "$nin") else arg
    flt = {key: value} if op == "$eq" and implicit else {key: {op: value}}
    declared, undeclared = (answer(s, flt) for s in lc_pair)
    assert declared == undeclared == model_ids(key, op, value), flt


# --- 5. natural-language queries are plain words in all three stores; query_syntax=True opts in ---
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode  # noqa: E402

from hybridsearch.integrations.haystack import HybridSearchBM25Retriever, HybridSearchHybridRetriever  # noqa: E402

QS_TEXTS = {"win": "python install error on windows", "linux": "python install guide for linux"}
QUERY = "python install -windows"


def test_langchain_queries_are_plain_words():
    store = LCStore(DeterministicFakeEmbedding(size=4), dimension=4)
    store.add_texts(list(QS_TEXTS.values()), ids=list(QS_TEXTS))
    for mode in ("lexical", "hybrid"):
        assert "win" in [d.id for d in store.similarity_search(QUERY, k=5, mode=mode)]
    # the opt-in: -windows excludes the document from the BM25 part
    assert [d.id for d in store.similarity_search(QUERY, k=5, mode="lexical", query_syntax=True)] == ["linux"]
    # only the words count: with the syntax characters gone, the same hits and scores
    assert (store.similarity_search_with_score('"python install" -windows*', k=5, mode="lexical")
            == store.similarity_search_with_score("python install windows", k=5, mode="lexical"))


def test_llamaindex_queries_are_plain_words():
    store = LIStore("memory")
    store.add([TextNode(id_=i, text=t, embedding=[1.0, 0.0]) for i, t in QS_TEXTS.items()])
    for mode in (VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.HYBRID):
        q = VectorStoreQuery(query_str=QUERY, query_embedding=[1.0, 0.0], mode=mode, similarity_top_k=5)
        assert "win" in store.query(q).ids
    q = VectorStoreQuery(query_str=QUERY, mode=VectorStoreQueryMode.TEXT_SEARCH, similarity_top_k=5)
    assert store.query(q, query_syntax=True).ids == ["linux"]


def test_haystack_queries_are_plain_words():
    store = HybridSearchDocumentStore("memory", embedding_dim=2)
    store.write_documents([HSDocument(id=i, content=t, embedding=[1.0, 0.0]) for i, t in QS_TEXTS.items()])
    assert "win" in [d.id for d in store.bm25_retrieval(QUERY, top_k=5)]
    assert "win" not in [d.id for d in store.bm25_retrieval(QUERY, top_k=5, query_syntax=True)]
    hybrid = HybridSearchHybridRetriever(store, top_k=5)
    assert "win" in [d.id for d in hybrid.run(query=QUERY, query_embedding=[1.0, 0.0])["documents"]]
    for syntax in (False, True):
        bm25 = HybridSearchBM25Retriever(store, top_k=5, query_syntax=syntax)
        assert ("win" in [d.id for d in bm25.run(query=QUERY)["documents"]]) is not syntax
        assert HybridSearchBM25Retriever.from_dict(bm25.to_dict()).query_syntax is syntax
        assert HybridSearchHybridRetriever.from_dict(
            HybridSearchHybridRetriever(store, query_syntax=syntax).to_dict()).query_syntax is syntax


# --- 6. LangChain relevance of linear hybrid: the weighted mean of its [0, 1] parts --------------
import math  # noqa: E402

from tests.integrations.test_langchain import DIM, bm25, corpus, cosine  # noqa: E402
from tests.models import fusion_reference  # noqa: E402


@pytest.mark.parametrize("weights", [{"text": 3, "vector": 5}, {"text": 0.2, "vector": 0.3}, None])
def test_langchain_linear_hybrid_relevance_is_the_weighted_mean(weights):
    docs = corpus()
    emb = DeterministicFakeEmbedding(size=DIM)
    store = LCStore(emb)
    store.add_documents(docs)
    query = "garden pepper"
    order = [d.id for d in docs]
    fused, _ = fusion_reference(order, [("text", bm25(docs, query), False, 0.0),
                                        ("vector", cosine(docs, query, emb), False, math.nan)], "linear",
                                weights=weights)
    total = 1.0 if weights is None else sum(weights.values())
    options = {} if weights is None else {"weights": weights}
    got = store.similarity_search_with_relevance_scores(query, k=len(docs), mode="hybrid", fusion="linear",
                                                         **options)
    assert len(got) == len(docs)
    for doc, relevance in got:
        assert 0.0 <= relevance <= 1.0
        assert relevance == pytest.approx(fused[doc.id] / total, abs=1e-5), doc.id
    store.close()


# --- 7. LlamaIndex to_dict / from_dict reopens the same collection, or refuses -------------------
def test_llamaindex_to_dict_from_dict_reopens_the_collection(tmp_path):
    path = str(tmp_path / "nodes.db")
    store = LIStore("sqlite", path=path, metric="l2", metadata_fields={"year": int})
    nodes = [TextNode(id_="a", text="a", embedding=[1.0, 0.0], metadata={"year": 2000}),
             TextNode(id_="b", text="b", embedding=[0.0, 3.0], metadata={"year": 2001})]
    store.add(nodes)
    data = store.to_dict()
    store.close()
    back = LIStore.from_dict(data)
    try:
        assert back.metadata_fields == {"year": "int"} and back.embed_dim == 2
        assert sorted(n.node_id for n in back.get_nodes()) == ["a", "b"]
        # l2: the score is minus the distance (cosine would score a and b alike from [1, 1])
        res = back.query(VectorStoreQuery(query_embedding=[0.0, 2.0], similarity_top_k=2))
        assert res.ids == ["b", "a"]
        assert res.similarities == pytest.approx([-1.0, -(5 ** 0.5)], abs=1e-5)
    finally:
        back.close()
    # LlamaIndex's own form (BaseComponent.to_dict) carries stores_text / is_embedding_query too
    again = LIStore.from_dict({**data, "stores_text": True, "is_embedding_query": True})
    assert sorted(n.node_id for n in again.get_nodes()) == ["a", "b"]
    again.close()


def test_llamaindex_to_dict_refuses_an_adopted_collection():
    store = LIStore("memory")
    store.add([TextNode(id_="a", text="a", embedding=[1.0, 0.0])])
    with pytest.raises(hs.UnsupportedError, match="open DocumentArray"):
        LIStore(store.client).to_dict()


# --- 8. LangChain: keywords the store sets itself, by_vector modes, duplicate ids ----------------
@pytest.fixture
def lc_small():
    store = LCStore(DeterministicFakeEmbedding(size=4), dimension=4)
    store.add_texts(["a b", "c d"], ids=["1", "2"])
    yield store
    store.close()


@pytest.mark.parametrize("keyword, spelling", [("limit", "k="), ("text", "the query"), ("vector", "the query")])
def test_langchain_find_arguments_the_store_sets_are_config_errors(lc_small, keyword, spelling):
    value = {"limit": 1, "text": "a", "vector": [1.0, 0.0, 0.0, 0.0]}[keyword]
    for search in (lambda: lc_small.similarity_search("a", k=2, **{keyword: value}),
                   lambda: lc_small.similarity_search("a", k=2, mode="hybrid", **{keyword: value}),
                   lambda: lc_small.similarity_search_by_vector([1.0, 0.0, 0.0, 0.0], k=2, **{keyword: value})):
        with pytest.raises(hs.ConfigError, match=f"{keyword}=.*{spelling}"):
            search()


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_langchain_by_vector_searches_vectors_only(lc_small, mode):
    with pytest.raises(hs.ConfigError, match="vectors only"):
        lc_small.similarity_search_by_vector([1.0, 0.0, 0.0, 0.0], k=2, mode=mode)
    with pytest.raises(hs.ConfigError, match="vectors only"):
        lc_small.max_marginal_relevance_search_by_vector([1.0, 0.0, 0.0, 0.0], k=2, mode=mode)
    got = lc_small.similarity_search_by_vector([1.0, 0.0, 0.0, 0.0], k=2, mode="vector")
    assert sorted(d.id for d in got) == ["1", "2"]


@pytest.mark.parametrize("storage", ["memory", "sqlite"])
def test_langchain_duplicate_ids_in_a_batch_last_wins(storage, tmp_path):
    options = {"path": tmp_path / "dup.db"} if storage == "sqlite" else {}
    store = LCStore(DeterministicFakeEmbedding(size=4), storage, dimension=4, **options)
    assert store.add_texts(["first", "second", "other"], [{"n": 1}, {"n": 2}, {}], ids=["x", "x", "y"]) == ["x", "x", "y"]
    got = {d.id: (d.page_content, d.metadata) for d in store.get_by_ids(["x", "y"])}
    assert got == {"x": ("second", {"n": 2}), "y": ("other", {})}
    assert len(store.collection) == 2
    store.close()
