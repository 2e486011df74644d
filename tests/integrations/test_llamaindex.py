"""The LlamaIndex vector store (hybridsearch.integrations.llamaindex), through LlamaIndex's API.

LlamaIndex ships no standard vector-store test class, so this is the suite its own tests of
SimpleVectorStore would be: add / get / delete / clear, every filter operator and condition
(checked against SimpleVectorStore itself, the independent reference, in a hypothesis test, and
against a plain Python model for nested filters), BM25 and hybrid queries against models of
API.md's formulas, an end-to-end VectorStoreIndex, reopening a path= store, and typed errors.
It runs on the embedded storages memory, hnsw and sqlite, and on elasticsearch when its node
answers (HS_START_ENGINES=0 skips it, naming the missing node).
"""
import asyncio
import math
import urllib.error
import urllib.request
import uuid
from typing import List

import numpy as np
import pytest

pytest.importorskip("llama_index.core", reason='needs the extra "llamaindex": pip install "hybridsearch[llamaindex]"')

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from llama_index.core import Document, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import BaseEmbedding  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores import SimpleVectorStore  # noqa: E402
from llama_index.core.vector_stores.types import (FilterCondition, FilterOperator, MetadataFilter,  # noqa: E402
                                                  MetadataFilters, VectorStoreQuery, VectorStoreQueryMode)

import hybridsearch as hs  # noqa: E402
from hybridsearch.integrations.llamaindex import HybridSearchVectorStore  # noqa: E402
from tests.contract.test_lexical import bm25_field  # noqa: E402
from tests.engines import engine  # noqa: E402
from tests.hidden_modules import run_without  # noqa: E402
from tests.models import check_topk, english_tokens, exact_scores, fusion_reference  # noqa: E402

EMBEDDED = ["memory", "hnsw", "sqlite"]
EXACT = ["memory", "sqlite"]  # exact vector search: results equal SimpleVectorStore's
DECLARED = {"color": str, "size": int, "weight": float}
F = FilterOperator


def open_store(storage: str, tmp_path, opened: list, **kw) -> HybridSearchVectorStore:
    """A fresh store on `storage` (sqlite: a file under tmp_path; elasticsearch: a new index, whose
    URL goes into `opened` too, for the teardown to drop)."""
    if storage == "sqlite":
        kw.setdefault("path", str(tmp_path / f"nodes-{uuid.uuid4().hex}.db"))
    elif storage == "elasticsearch":
        url, why = engine("es")
        if url is None:
            pytest.skip(f"no elasticsearch node: {why}")
        kw.setdefault("hosts", url)
        kw.setdefault("index", f"hs-test-{uuid.uuid4().hex}")
        kw.setdefault("refresh", True)
        opened.append(f"{url}/{kw['index']}")
    store = HybridSearchVectorStore(storage, **kw)
    opened.append(store)
    return store


def close_all(opened: list) -> None:
    """Closes the stores and drops the indexes over HTTP (as tests/conftest.py's make_da does)."""
    for s in opened:
        if isinstance(s, HybridSearchVectorStore):
            s.close()
            continue
        try:
            urllib.request.urlopen(urllib.request.Request(s, method="DELETE"), timeout=60).close()
        except urllib.error.HTTPError as e:
            if e.code != 404:  # never created (the test wrote nothing) is fine
                raise


@pytest.fixture(params=EMBEDDED + ["elasticsearch"])
def storage(request):
    return request.param


@pytest.fixture
def make_store(storage, tmp_path):
    opened: list = []
    yield lambda **kw: open_store(storage, tmp_path, opened, **kw)
    close_all(opened)


def node(i: int, text: str, emb, doc: str = None, **metadata) -> TextNode:
    n = TextNode(id_=f"n{i}", text=text, embedding=list(map(float, emb)), metadata=metadata)
    if doc is not None:
        n.relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)}
    return n


TEXTS = ["the quick brown fox", "a lazy dog sleeps", "quick thinking saves the day", "brown bread and butter",
         "foxes and dogs are friends", "nothing to see here", "the day the fox slept", "butter makes it better"]


def corpus(rng, n=8, d=4) -> List[TextNode]:
    X = rng.standard_normal((n, d))
    return [node(i, TEXTS[i % len(TEXTS)], X[i], doc=f"doc{i % 3}", color="rgb"[i % 3], size=i,
                 weight=float(i) / 2, tags=["t" + str(i % 2), "all"]) for i in range(n)]


def same_node(a: TextNode, b: TextNode) -> None:
    assert a.node_id == b.node_id
    assert a.text == b.text
    assert a.metadata == b.metadata
    assert a.ref_doc_id == b.ref_doc_id
    assert {k: v.node_id for k, v in a.relationships.items()} == {k: v.node_id for k, v in b.relationships.items()}
    assert type(a) is type(b)


# ------------------------------------------------------------ the store's basic contract
def test_add_get_round_trip(make_store, rng):
    store = make_store(metadata_fields=DECLARED)
    nodes = corpus(rng)
    assert store.add(nodes) == [n.node_id for n in nodes]
    got = store.get_nodes(node_ids=["n3", "n1", "missing"])
    assert [g.node_id for g in got] == ["n3", "n1"]
    for g in got:
        same_node(g, nodes[int(g.node_id[1:])])
        np.testing.assert_allclose(g.embedding, nodes[int(g.node_id[1:])].embedding, rtol=1e-6)
    assert sorted(n.node_id for n in store.get_nodes()) == sorted(n.node_id for n in nodes)
    assert store.stores_text and store.is_embedding_query


def test_add_is_an_upsert(make_store, rng):
    store = make_store()
    nodes = corpus(rng, n=3)
    store.add(nodes)
    store.add([node(1, "replaced text", [1, 0, 0, 0], color="z")])
    got = {n.node_id: n for n in store.get_nodes()}
    assert len(got) == 3 and got["n1"].text == "replaced text" and got["n1"].metadata == {"color": "z"}


def test_delete_by_ref_doc(make_store, rng):
    store = make_store()
    nodes = corpus(rng)
    store.add(nodes)
    store.delete("doc1")
    assert sorted(n.node_id for n in store.get_nodes()) == sorted(n.node_id for n in nodes if n.ref_doc_id != "doc1")


@pytest.mark.parametrize("declared", [True, False])
def test_delete_nodes_ids_and_filters(make_store, rng, declared):
    store = make_store(metadata_fields=DECLARED if declared else None)
    nodes = corpus(rng)
    store.add(nodes)
    big = MetadataFilters(filters=[MetadataFilter(key="size", value=3, operator=F.GTE)])
    store.delete_nodes(node_ids=["n1", "n4", "n6"], filters=big)  # n4 and n6 only
    assert sorted(n.node_id for n in store.get_nodes()) == ["n0", "n1", "n2", "n3", "n5", "n7"]
    store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="color", value="r")]))
    assert sorted(n.node_id for n in store.get_nodes()) == ["n1", "n2", "n5", "n7"]
    store.delete_nodes(node_ids=["n2"])
    assert sorted(n.node_id for n in store.get_nodes()) == ["n1", "n5", "n7"]


def test_clear(make_store, rng):
    store = make_store()
    store.add(corpus(rng))
    store.clear()
    assert store.get_nodes() == []
    res = store.query(VectorStoreQuery(query_embedding=[1.0, 0, 0, 0], similarity_top_k=3))
    assert res.ids == [] and res.nodes == []


def test_node_and_doc_id_restrictions(make_store, rng):
    store = make_store()
    nodes = corpus(rng)
    store.add(nodes)
    q = VectorStoreQuery(query_embedding=[1.0, 0.5, 0, 0], similarity_top_k=10, node_ids=["n0", "n1", "n2", "n5"],
                         doc_ids=["doc0", "doc1"])
    assert sorted(store.query(q).ids) == ["n0", "n1"]  # n2 and n5 are of doc2
    q.mode = VectorStoreQueryMode.TEXT_SEARCH
    q.query_str = "the fox dog"
    assert set(store.query(q).ids) <= {"n0", "n1"}


def test_async_variants(make_store, rng):
    store = make_store()
    nodes = corpus(rng)

    async def run():
        await store.async_add(nodes)
        q = VectorStoreQuery(query_embedding=list(nodes[2].embedding), similarity_top_k=2)
        res = await store.aquery(q)
        await store.adelete("doc0")
        await store.adelete_nodes(node_ids=["n1"])
        left = await store.aget_nodes()
        await store.aclear()
        return res, left, await store.aget_nodes()

    res, left, after = asyncio.run(run())
    assert res.ids[0] == "n2"
    assert sorted(n.node_id for n in left) == sorted(n.node_id for n in nodes if n.ref_doc_id != "doc0"
                                                     and n.node_id != "n1")
    assert after == []


# ------------------------------------------------------------ vector, lexical and hybrid queries
@pytest.mark.parametrize("storage", EMBEDDED)
def test_default_query_is_the_exact_top_k(make_store, storage, rng):
    store = make_store()
    X = rng.standard_normal((60, 8))
    store.add([node(i, "x", X[i]) for i in range(60)])
    ids = [f"n{i}" for i in range(60)]
    for q in rng.standard_normal((5, 8)):
        res = store.query(VectorStoreQuery(query_embedding=list(q), similarity_top_k=7))
        tol = 1e-4 if storage in EXACT else 0.05  # hnsw: int8 codes, scores of the rescored hits within 5%
        check_topk(res.ids, res.similarities, ids, exact_scores(X, q, "cosine"), 7, tol=tol)
        assert [n.node_id for n in res.nodes] == res.ids


@pytest.mark.parametrize("storage", EMBEDDED)
@pytest.mark.parametrize("mode", [VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.SPARSE])
def test_text_search_is_bm25(make_store, storage, rng, mode):
    store = make_store()
    nodes = corpus(rng)
    store.add(nodes)
    docs = {n.node_id: n for n in nodes}
    for text in ["quick fox", "butter", "the day", "dogs -quick \"fox"]:
        ref = bm25_field(docs, "text", english_tokens(text.replace("-", " ").replace('"', " ")))
        res = store.query(VectorStoreQuery(query_str=text, mode=mode, similarity_top_k=3))
        order = list(ref)
        check_topk(res.ids, res.similarities, order, [ref[i] for i in order], 3)


@pytest.mark.parametrize("storage", EMBEDDED)
@pytest.mark.parametrize("alpha", [None, 0.0, 0.25, 1.0])
def test_hybrid_is_linear_fusion_weighted_by_alpha(make_store, storage, rng, alpha):
    store = make_store()
    nodes = corpus(rng, n=16)
    store.add(nodes)
    docs = {n.node_id: n for n in nodes}
    X = np.array([n.embedding for n in nodes])
    order = [n.node_id for n in nodes]
    a = 0.5 if alpha is None else alpha
    for text in ["quick brown fox", "butter day"]:
        q = rng.standard_normal(4)
        text_scores = bm25_field(docs, "text", english_tokens(text))
        vec = dict(zip(order, exact_scores(X, q, "cosine")))
        fused, _ = fusion_reference(order, [("text", text_scores, False, 0.0), ("vector", vec, False, math.nan)],
                                    "linear", weights={"text": 1 - a, "vector": a})
        res = store.query(VectorStoreQuery(query_str=text, query_embedding=list(q), similarity_top_k=5,
                                           mode=VectorStoreQueryMode.HYBRID, alpha=alpha))
        ids = list(fused)
        tol = 1e-4 if storage in EXACT else 0.05
        check_topk(res.ids, res.similarities, ids, [fused[i] for i in ids], 5, tol=tol)


def test_hybrid_top_k_and_filters(make_store, rng):
    store = make_store(metadata_fields=DECLARED)
    store.add(corpus(rng, n=16))
    flt = MetadataFilters(filters=[MetadataFilter(key="color", value="g")])
    res = store.query(VectorStoreQuery(query_str="quick fox", query_embedding=[1.0, 0, 0, 0], similarity_top_k=2,
                                       hybrid_top_k=4, mode=VectorStoreQueryMode.HYBRID, filters=flt))
    assert len(res.ids) == 4 and all(n.metadata["color"] == "g" for n in res.nodes)


# ------------------------------------------------------------ filters: SimpleVectorStore is the reference
KEYS = {"color": st.sampled_from(["r", "g", "b", "rg", ""]), "size": st.integers(-3, 3),
        "weight": st.sampled_from([-1.5, 0.0, 0.5, 2.0]), "tag": st.sampled_from(["x", "y", "xy"]),
        "n": st.integers(0, 4), "tags": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2)}
SCALAR_OPS = [F.EQ, F.NE, F.GT, F.GTE, F.LT, F.LTE, F.IN, F.NIN, F.IS_EMPTY]
STR_KEYS = ("color", "tag")


@st.composite
def leaf(draw):
    key = draw(st.sampled_from(sorted(KEYS)))
    if key == "tags":
        op = draw(st.sampled_from([F.CONTAINS, F.ANY, F.ALL, F.IS_EMPTY]))
        value = draw(st.sampled_from(["a", "b"])) if op == F.CONTAINS else draw(st.lists(st.sampled_from("abc"),
                                                                                          min_size=1, max_size=2))
        return MetadataFilter(key=key, value=value, operator=op)
    ops = SCALAR_OPS + ([F.TEXT_MATCH, F.TEXT_MATCH_INSENSITIVE, F.CONTAINS] if key in STR_KEYS else [])
    op = draw(st.sampled_from(ops))
    values = KEYS[key]
    if op in (F.IN, F.NIN):
        value = draw(st.lists(values, min_size=0, max_size=3).map(lambda v: list(dict.fromkeys(v))))
        if key == "weight":  # a list of floats only: pydantic's union would read [0.0, 2] as ints
            value = [float(v) for v in value]
    elif op in (F.TEXT_MATCH, F.TEXT_MATCH_INSENSITIVE, F.CONTAINS):
        value = draw(st.sampled_from(["r", "G", "x", "y"]))
    else:
        value = draw(values)
    return MetadataFilter(key=key, value=value, operator=op)


@st.composite
def metadata(draw):
    keys = draw(st.lists(st.sampled_from(sorted(KEYS)), unique=True))
    return {k: draw(KEYS[k]) for k in keys}


@st.composite
def case(draw):
    n = draw(st.integers(1, 14))
    metas = [draw(metadata()) for _ in range(n)]
    vectors = draw(st.lists(st.lists(st.integers(-3, 3), min_size=3, max_size=3).filter(any), min_size=n + 1,
                            max_size=n + 1))
    flt = MetadataFilters(filters=draw(st.lists(leaf(), max_size=3)),
                          condition=draw(st.sampled_from([FilterCondition.AND, FilterCondition.OR,
                                                          FilterCondition.NOT])))
    return metas, vectors, flt, draw(st.integers(1, 6))


@pytest.mark.parametrize("storage", EXACT)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=case())
def test_filters_equal_simple_vector_store(storage, tmp_path, data):
    """DEFAULT queries with every filter operator and condition return SimpleVectorStore's
    hits and similarities, on a store declaring the scalar keys and on one declaring none."""
    metas, vectors, flt, k = data
    nodes = [TextNode(id_=f"n{i}", text=f"text {i}", embedding=[float(x) for x in v], metadata=m)
             for i, (v, m) in enumerate(zip(vectors, metas))]
    q = [float(x) for x in vectors[-1]]
    ref = SimpleVectorStore()
    ref.add(nodes)
    everything = ref.query(VectorStoreQuery(query_embedding=q, similarity_top_k=len(nodes), filters=flt))
    expect = dict(zip(everything.ids, everything.similarities))
    opened: list = []
    try:
        for declared in (DECLARED, None):
            store = open_store(storage, tmp_path, opened, metadata_fields=declared)
            store.add(nodes)
            res = store.query(VectorStoreQuery(query_embedding=q, similarity_top_k=k, filters=flt))
            check_topk(res.ids, res.similarities, list(expect), list(expect.values()), k)
            assert sorted(n.node_id for n in store.get_nodes(filters=flt)) == sorted(expect)
            store.delete_nodes(filters=flt)
            assert sorted(n.node_id for n in store.get_nodes()) == sorted(set(n.node_id for n in nodes) - set(expect))
    finally:
        close_all(opened)


FIXED_METADATA = [{"color": "r", "size": 1, "weight": 0.5, "tag": "x", "n": 0, "tags": ["a"]},
                  {"color": "", "size": -2, "weight": 2.0, "tag": "xy", "tags": []},
                  {"color": "rg", "size": 3, "n": 4, "tags": ["a", "b"]},
                  {"size": 0, "weight": -1.5, "tag": "y", "n": 2},
                  {"color": "g", "weight": 0.0, "tags": ["c"]}, {}]
LEAF_VALUES = {"color": ["r", "rg", ""], "size": [1, 0, -2], "weight": [0.5, -1.5], "tag": ["x", "y"], "n": [0, 4]}


def every_leaf():
    """Each operator on each key with a few values: the single filters LlamaIndex users write."""
    for key, values in LEAF_VALUES.items():
        for value in values:
            for op in SCALAR_OPS:
                if op not in (F.IN, F.NIN):  # those take lists (below)
                    yield MetadataFilter(key=key, value=value, operator=op)
            if isinstance(value, str):
                for op in (F.TEXT_MATCH, F.TEXT_MATCH_INSENSITIVE, F.CONTAINS):
                    yield MetadataFilter(key=key, value=value, operator=op)
        listed = [float(v) for v in values] if key == "weight" else values
        for op in (F.IN, F.NIN):
            yield MetadataFilter(key=key, value=listed[:1], operator=op)
            yield MetadataFilter(key=key, value=listed, operator=op)
            yield MetadataFilter(key=key, value=[], operator=op)
    for op, value in ((F.CONTAINS, "a"), (F.ANY, ["a", "c"]), (F.ALL, ["a", "b"]), (F.IS_EMPTY, None)):
        yield MetadataFilter(key="tags", value=value, operator=op)


@pytest.mark.parametrize("storage", EMBEDDED + ["elasticsearch"])
@pytest.mark.parametrize("declared", [True, False])
def test_every_operator_equals_simple_vector_store(storage, tmp_path, declared):
    nodes = [TextNode(id_=f"n{i}", text="t", embedding=[1.0, float(i)], metadata=m)
             for i, m in enumerate(FIXED_METADATA)]
    ref = SimpleVectorStore()
    ref.add(nodes)
    opened: list = []
    try:
        store = open_store(storage, tmp_path, opened, metadata_fields=DECLARED if declared else None)
        store.add(nodes)
        for leaf_ in every_leaf():
            flt = MetadataFilters(filters=[leaf_])
            expect = ref.query(VectorStoreQuery(query_embedding=[1.0, 0.0], similarity_top_k=10, filters=flt)).ids
            assert sorted(n.node_id for n in store.get_nodes(filters=flt)) == sorted(expect), leaf_
    finally:
        close_all(opened)


def model(flt, md: dict) -> bool:
    """LlamaIndex's filter semantics written plainly, nested MetadataFilters included."""
    if isinstance(flt, MetadataFilters):
        got = [model(f, md) for f in flt.filters]
        if not got:
            return True
        cond = flt.condition or FilterCondition.AND
        return all(got) if cond == FilterCondition.AND else any(got) if cond == FilterCondition.OR else not any(got)
    v, x, op = md.get(flt.key), flt.value, flt.operator
    if op == F.IS_EMPTY:
        return v is None or v == "" or v == []
    if v is None:
        return op in (F.NE, F.NIN)
    return {F.EQ: lambda: v == x, F.NE: lambda: v != x, F.GT: lambda: v > x, F.GTE: lambda: v >= x,
            F.LT: lambda: v < x, F.LTE: lambda: v <= x, F.IN: lambda: v in x, F.NIN: lambda: v not in x,
            F.CONTAINS: lambda: x in v, F.TEXT_MATCH: lambda: x in v,
            F.TEXT_MATCH_INSENSITIVE: lambda: x.lower() in v.lower(),
            F.ANY: lambda: any(e in v for e in x), F.ALL: lambda: all(e in v for e in x)}[op]()


def nested(depth=2):
    conds = st.sampled_from([FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT])
    child = leaf() if depth == 0 else st.one_of(leaf(), nested(depth - 1))
    return st.builds(lambda fs, c: MetadataFilters(filters=fs, condition=c), st.lists(child, max_size=3), conds)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(metas=st.lists(metadata(), min_size=1, max_size=12), flt=nested())
def test_nested_filters_equal_the_model(tmp_path, metas, flt):
    """Nested MetadataFilters (which SimpleVectorStore refuses) against the plain model, declared
    keys pushed down to the storage or evaluated in Python alike."""
    nodes = [TextNode(id_=f"n{i}", text="t", embedding=[1.0, float(i)], metadata=m) for i, m in enumerate(metas)]
    expect = sorted(n.node_id for n in nodes if model(flt, n.metadata))
    for declared in (DECLARED, None):
        store = HybridSearchVectorStore("memory", metadata_fields=declared)
        store.add(nodes)
        assert sorted(n.node_id for n in store.get_nodes(filters=flt)) == expect
        res = store.query(VectorStoreQuery(query_embedding=[1.0, 0.0], similarity_top_k=20, filters=flt))
        assert sorted(res.ids) == expect


def test_filters_on_reserved_keys(make_store, rng):
    """doc_id / ref_doc_id are metadata keys as in LlamaIndex's own stores."""
    store = make_store()
    nodes = corpus(rng)
    store.add(nodes)
    flt = MetadataFilters(filters=[MetadataFilter(key="doc_id", value="doc1")])
    assert sorted(n.node_id for n in store.get_nodes(filters=flt)) == sorted(
        n.node_id for n in nodes if n.ref_doc_id == "doc1")


# ------------------------------------------------------------ end to end
class WordEmbedding(BaseEmbedding):
    """Deterministic: counts of a few words, plus a constant so no vector is zero."""

    words: List[str] = ["fox", "dog", "butter", "day", "bread"]

    def _vec(self, text: str) -> List[float]:
        toks = english_tokens(text)
        return [float(toks.count(w)) for w in self.words] + [0.1]

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._vec(text)

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._vec(query)


def test_vector_store_index_end_to_end(make_store):
    store = make_store(metadata_fields={"year": int})
    embed = WordEmbedding()
    docs = [Document(text=t, metadata={"year": 2000 + i}, id_=f"d{i}") for i, t in enumerate(TEXTS)]
    index = VectorStoreIndex.from_documents(docs, storage_context=StorageContext.from_defaults(vector_store=store),
                                            embed_model=embed)
    got = index.as_retriever(similarity_top_k=3).retrieve("butter")
    nodes = store.get_nodes()
    X = np.array([embed.get_text_embedding(n.get_content(metadata_mode="embed")) for n in nodes])
    scores = exact_scores(X, np.array(embed.get_query_embedding("butter")), "cosine")
    check_topk([h.node.node_id for h in got], [h.score for h in got], [n.node_id for n in nodes], scores, 3)
    assert got[0].node.text in ("brown bread and butter", "butter makes it better")
    # lexical side only (alpha=0): "sleeps" is no word the embedding knows
    hyb = index.as_retriever(vector_store_query_mode="hybrid", alpha=0.0, similarity_top_k=2).retrieve("sleeps")
    assert hyb[0].node.text == "a lazy dog sleeps" and hyb[0].node.ref_doc_id == "d1"
    flt = MetadataFilters(filters=[MetadataFilter(key="year", value=2004, operator=F.GTE)])
    filtered = index.as_retriever(filters=flt, similarity_top_k=10).retrieve("fox")
    assert sorted(h.node.metadata["year"] for h in filtered) == [2004, 2005, 2006, 2007]
    assert [h.node.node_id for h in asyncio.run(index.as_retriever(similarity_top_k=3).aretrieve("butter"))] == \
        [h.node.node_id for h in got]
    index.delete_ref_doc("d3")
    assert "brown bread and butter" not in [n.text for n in store.get_nodes()]


# ------------------------------------------------------------ reopening and errors
@pytest.mark.parametrize("storage", ["sqlite", "hnsw"])
def test_reopen_path_store(storage, tmp_path, rng):
    path = str(tmp_path / ("nodes.db" if storage == "sqlite" else "nodes"))
    nodes = corpus(rng)
    store = HybridSearchVectorStore(storage, path=path, metadata_fields=DECLARED)
    store.add(nodes)
    q = VectorStoreQuery(query_embedding=[1.0, 0, 0, 0], similarity_top_k=3,
                         filters=MetadataFilters(filters=[MetadataFilter(key="size", value=2, operator=F.GT)]))
    before = store.query(q)
    store.close()
    with pytest.raises(hs.ConfigError, match="embed_dim"):
        HybridSearchVectorStore(storage, path=path, metadata_fields=DECLARED).get_nodes()
    again = HybridSearchVectorStore(storage, path=path, metadata_fields=DECLARED, embed_dim=4)
    try:
        after = again.query(q)
        assert after.ids == before.ids
        np.testing.assert_allclose(after.similarities, before.similarities, rtol=1e-6)
        for n in again.get_nodes():
            same_node(n, nodes[int(n.node_id[1:])])
    finally:
        again.close()
    # the dimension can come from the first vector query too
    lazy = HybridSearchVectorStore(storage, path=path, metadata_fields=DECLARED)
    try:
        assert lazy.query(q).ids == before.ids
    finally:
        lazy.close()


def test_wrong_dimension_writes_nothing(make_store, rng):
    store = make_store(metadata_fields=DECLARED)
    store.add(corpus(rng, n=3))
    bad = [node(7, "ok", [1, 2, 3, 4]), node(8, "short", [1, 2, 3])]
    with pytest.raises(hs.SchemaError):
        store.add(bad)
    assert sorted(n.node_id for n in store.get_nodes()) == ["n0", "n1", "n2"]


def test_bad_nodes_write_nothing(make_store, rng):
    store = make_store(metadata_fields=DECLARED)
    store.add(corpus(rng, n=2))
    no_embedding = TextNode(id_="e", text="no vector")
    with pytest.raises(hs.SchemaError, match="no embedding"):
        store.add([node(5, "fine", [1, 0, 0, 0]), no_embedding])
    with pytest.raises(hs.SchemaError, match="size"):
        store.add([node(6, "fine", [1, 0, 0, 0]), node(7, "bad", [0, 1, 0, 0], size="seven")])
    assert sorted(n.node_id for n in store.get_nodes()) == ["n0", "n1"]


def test_typed_errors(rng):
    store = HybridSearchVectorStore("memory")
    store.add(corpus(rng, n=4))
    with pytest.raises(hs.UnsupportedError, match="mmr"):
        store.query(VectorStoreQuery(query_embedding=[1.0, 0, 0, 0], mode=VectorStoreQueryMode.MMR))
    with pytest.raises(hs.ConfigError, match="alpha"):
        store.query(VectorStoreQuery(query_embedding=[1.0, 0, 0, 0], query_str="fox", alpha=1.5,
                                     mode=VectorStoreQueryMode.HYBRID))
    with pytest.raises(hs.ConfigError, match="query_str"):
        store.query(VectorStoreQuery(mode=VectorStoreQueryMode.TEXT_SEARCH))
    with pytest.raises(hs.ConfigError, match="query_embedding"):
        store.query(VectorStoreQuery(query_str="fox"))
    with pytest.raises(hs.FilterError):  # a comparison Python refuses: "r" > 1
        store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="color", value=1, operator=F.GT)]))
    with pytest.raises(hs.ConfigError, match="embedding"):
        HybridSearchVectorStore("memory", metadata_fields={"embedding": int})
    with pytest.raises(hs.ConfigError, match="list"):
        HybridSearchVectorStore("memory", metadata_fields={"tags": list})
    with pytest.raises(hs.ConfigError):
        HybridSearchVectorStore("no-such-storage", embed_dim=3)


def test_an_open_document_array(tmp_path, rng):
    from hybridsearch.integrations.llamaindex.store import node_schema
    da = hs.DocumentArray(node_schema(4, {"color": str}), storage="memory")
    store = HybridSearchVectorStore(da, metadata_fields={"color": str})
    store.add(corpus(rng, n=3))
    assert len(da) == 3 and store.embed_dim == 4
    with pytest.raises(hs.ConfigError, match="not a LlamaIndex store"):
        HybridSearchVectorStore(da, metadata_fields={"size": int})


def test_importing_hybridsearch_imports_no_framework_and_a_missing_one_names_the_extra(tmp_path):
    r = run_without(tmp_path, (), "import sys, hybridsearch, hybridsearch.integrations; "
                                  "assert 'llama_index' not in sys.modules, 'imported llama_index'")
    assert r.returncode == 0, r.stderr
    r = run_without(tmp_path, ("llama_index",), "import hybridsearch.integrations.llamaindex")
    assert r.returncode != 0
    assert 'UnsupportedError' in r.stderr and 'pip install "hybridsearch[llamaindex]"' in r.stderr


def test_query_kwargs_from_retrievers_are_accepted(rng):
    """VectorIndexRetriever passes its extra keyword arguments to query(); LlamaIndex's stores take them."""
    store = HybridSearchVectorStore("memory")
    store.add(corpus(rng, n=4))
    res = store.query(VectorStoreQuery(query_embedding=[1.0, 0, 0, 0], similarity_top_k=2), mmr_threshold=None)
    assert len(res.ids) == 2



def test_flat_metadata_refuses_nested_values_writing_nothing(rng):
    store = HybridSearchVectorStore("memory", flat_metadata=True)
    store.add([node(0, "flat", [1, 0, 0, 0], a=1)])
    with pytest.raises(hs.SchemaError, match="n2"):
        store.add([node(1, "flat", [0, 1, 0, 0], a=2), node(2, "nested", [0, 0, 1, 0], a={"b": 1})])
    assert [n.node_id for n in store.get_nodes()] == ["n0"]


def test_delete_nodes_without_arguments_as_simple_vector_store(rng):
    nodes = corpus(rng, n=4)
    ref, store = SimpleVectorStore(), HybridSearchVectorStore("memory")
    for s in (ref, store):
        s.add(nodes)
        s.delete_nodes(node_ids=[])
    assert len(store.get_nodes()) == len(ref.data.embedding_dict) == 4
    for s in (ref, store):
        s.delete_nodes()
    assert store.get_nodes() == [] and ref.data.embedding_dict == {}


def test_other_node_types_round_trip(rng):
    from llama_index.core.schema import IndexNode
    store = HybridSearchVectorStore("memory")
    n = IndexNode(id_="i", text="points elsewhere", index_id="other-index", embedding=[1.0, 2.0], metadata={"k": [1]})
    store.add([n])
    got = store.get_nodes()[0]
    assert type(got) is IndexNode and got.index_id == "other-index" and got.text == n.text and got.metadata == n.metadata
