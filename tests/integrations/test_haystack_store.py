"""The Haystack store beyond Haystack's standard suite (test_haystack.py): the retriever components
in a pipeline (BM25, embedding and hybrid search against plain models), declared and undeclared
metadata filters against a plain Python model of Haystack's filter semantics, reopening a path=
store, refused writes that leave the store as it was, serialisation, and the missing extra.
"""
import math
import random
import sys
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("haystack", reason='needs the extra "haystack": pip install "hybridsearch[haystack]"')

from haystack import Pipeline  # noqa: E402
from haystack.dataclasses import Document  # noqa: E402
from haystack.document_stores.errors import DuplicateDocumentError  # noqa: E402
from haystack.document_stores.types import DuplicatePolicy  # noqa: E402
from haystack.errors import FilterError  # noqa: E402

import hybridsearch as hs  # noqa: E402
from hybridsearch.integrations.haystack import (HybridSearchBM25Retriever, HybridSearchDocumentStore,  # noqa: E402
                                                HybridSearchEmbeddingRetriever, HybridSearchHybridRetriever)
from tests.contract.test_lexical import bm25_field  # noqa: E402
from tests.hidden_modules import run_without  # noqa: E402
from tests.models import fusion_reference  # noqa: E402

D = 8
WORDS = "apple banana cherry river stone cloud paper glass tiger ocean".split()


def corpus(n=40, seed=0, d=D):
    """Documents with content, an embedding on most of them, and typed metadata (some missing)."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        meta = {}
        if rng.random() < 0.8:
            meta["n"] = rng.randint(-3, 3)
        if rng.random() < 0.8:
            meta["x"] = rng.choice([-1.5, 0.0, 0.5, 2.0, 3.25])
        if rng.random() < 0.8:
            meta["s"] = rng.choice(["red", "green", "blue", "Red"])
        if rng.random() < 0.7:
            meta["b"] = rng.random() < 0.5
        if rng.random() < 0.7:
            meta["u"] = rng.randint(0, 4)
        if rng.random() < 0.2:
            meta["nested"] = {"k": rng.randint(0, 2)}
        content = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) if rng.random() < 0.95 else None
        emb = [rng.uniform(-1, 1) for _ in range(d)] if rng.random() < 0.85 else None
        docs.append(Document(id=f"d{i:02d}", content=content, meta=meta, embedding=emb))
    return docs


DECLARED = {"n": int, "x": float, "s": str, "b": bool}


def open_store(kind, tmp_path, declared=True, **kw):
    fields = DECLARED if declared else None
    if kind == "sqlite":
        kw.setdefault("path", tmp_path / "store.db")
    if kind == "hnsw-path":
        kind = "hnsw"
        kw.setdefault("path", tmp_path / "hnsw")
    return HybridSearchDocumentStore(kind, embedding_dim=D, metadata_fields=fields, **kw)


# -- a plain model of Haystack's filter semantics (no dates: the generated values are not dates) --
def lookup(doc, field):
    if field.startswith("meta."):
        value = doc.meta
        for part in field.split(".")[1:]:
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value
    return getattr(doc, field) if field in ("id", "content") else doc.meta.get(field)


def model(doc, flt) -> bool:
    if "field" in flt:
        value, op, arg = lookup(doc, flt["field"]), flt["operator"], flt["value"]
        if op == "==":
            return value == arg
        if op == "!=":
            return value != arg
        if op == "in":
            return any(value == a for a in arg)
        if op == "not in":
            return not any(value == a for a in arg)
        if value is None or arg is None:
            return False
        return {">": value > arg, ">=": value >= arg, "<": value < arg, "<=": value <= arg}[op]
    results = [model(doc, c) for c in flt["conditions"]]
    return {"AND": all(results), "OR": any(results), "NOT": not all(results)}[flt["operator"]]


def random_filter(rng, depth=0):
    """A random Haystack filter over the corpus' fields whose comparisons Haystack can always make."""
    if depth < 2 and rng.random() < 0.4:
        return {"operator": rng.choice(["AND", "OR", "NOT"]),
                "conditions": [random_filter(rng, depth + 1) for _ in range(rng.randint(0, 3))]}
    key = rng.choice(["n", "x", "s", "b", "u", "id", "content", "nested.k", "legacy_n"])
    numbers = [-2, 0, 1, 2, 3, 0.5, 2.0, -1.5, True, False, 10**17]
    pools = {"n": numbers + [None], "x": numbers + [None], "u": numbers + [None], "nested.k": [0, 1, 2, None],
             "s": ["red", "Red", "blue", "nothing", None, 1], "b": [True, False, None, 1, 0],
             "id": ["d01", "d05", "zz", None], "content": ["apple", "apple banana", None], "legacy_n": [1, 2, None]}
    field = {"id": "id", "content": "content", "legacy_n": "n"}.get(key, f"meta.{key}")
    ordered = key in ("n", "x", "u", "nested.k", "b", "legacy_n")
    op = rng.choice(["==", "!=", "in", "not in"] + ([">", ">=", "<", "<="] if ordered else []))
    pool = pools[key]
    if op in ("in", "not in"):
        value = rng.sample(pool, rng.randint(0, 3))
    elif op in (">", ">=", "<", "<="):
        value = rng.choice([v for v in pool if not isinstance(v, str)])
    else:
        value = rng.choice(pool)
    return {"field": field, "operator": op, "value": value}


@pytest.mark.parametrize("kind", ["memory", "hnsw", "sqlite"])
def test_declared_and_undeclared_filters_answer_like_the_model(kind, tmp_path):
    """Random filters mixing pushed-down comparisons (declared columns) and Python ones (undeclared
    keys, id, content, nested keys, values a column cannot compare such as True == 1): the
    declared store, the undeclared store and the plain model agree, in insertion order."""
    docs = corpus()
    declared = open_store(kind, tmp_path, declared=True)
    plain = HybridSearchDocumentStore("memory", embedding_dim=D)
    declared.write_documents(docs)
    plain.write_documents(docs)
    rng = random.Random(7)
    for _ in range(150):
        flt = random_filter(rng)
        want = [d for d in docs if model(d, flt)]
        assert declared.filter_documents(flt) == want, flt
        assert plain.filter_documents(flt) == want, flt
        assert declared.count_documents_by_filter(flt) == len(want), flt
    declared.close()


def test_filters_of_declared_fields_after_update_and_delete_by_filter(tmp_path):
    """update_by_filter rewrites the declared columns too, so a pushed-down filter sees the change;
    delete_by_filter with a mixed filter deletes exactly the model's documents."""
    docs = corpus()
    store = open_store("sqlite", tmp_path)
    store.write_documents(docs)
    flt = {"field": "meta.u", "operator": "==", "value": 2}
    changed = [d.id for d in docs if model(d, flt)]
    assert store.update_by_filter(flt, {"n": 99, "s": "gold"}) == len(changed)
    got = store.filter_documents({"operator": "AND", "conditions": [
        {"field": "meta.n", "operator": "==", "value": 99}, {"field": "meta.s", "operator": "==", "value": "gold"}]})
    assert [d.id for d in got] == changed
    mixed = {"operator": "OR", "conditions": [{"field": "meta.n", "operator": "<", "value": 0},
                                              {"field": "meta.u", "operator": "==", "value": 1}]}
    current = store.filter_documents()
    gone = [d.id for d in current if model(d, mixed)]
    assert store.delete_by_filter(mixed) == len(gone)
    assert [d.id for d in store.filter_documents()] == [d.id for d in current if d.id not in set(gone)]


def test_filter_errors_are_haystacks_and_hybridsearchs():
    store = HybridSearchDocumentStore("memory", embedding_dim=D, metadata_fields=DECLARED)
    store.write_documents(corpus(10))
    for bad in [{"field": "meta.n", "operator": "~", "value": 1}, {"operator": "XOR", "conditions": []},
                {"field": "meta.n", "operator": ">", "value": "abc"}, {"field": "meta.s", "operator": "<", "value": 1},
                {"field": "meta.n", "operator": "in", "value": 3}, "meta.n == 1", [], "",
                {"operator": "AND", "conditions": [["meta.n", "==", 1]]}]:
        with pytest.raises(FilterError) as e:
            store.filter_documents(bad)
        assert isinstance(e.value, hs.FilterError)
    assert store.count_documents() == 10


def nest(depth, leaf, ops=("NOT", "AND", "NOT", "OR")):
    """`depth` levels of logic, each over the level below and one more comparison."""
    node = leaf
    for level in range(depth):
        other = {"field": "meta.x", "operator": "!=", "value": [0.5, 2.0][level % 2]}
        node = {"operator": ops[level % len(ops)], "conditions": [node, other]}
    return node


def test_deep_filters_answer_or_refuse_with_a_filter_error():
    """Nested logic up to 16 levels answers like the model (NOT of two conditions is two levels
    of hybridsearch's language, which takes 32); deeper is a FilterError, never a RecursionError."""
    docs = corpus(12)
    for fields in (DECLARED, None):
        store = HybridSearchDocumentStore("memory", embedding_dim=D, metadata_fields=fields)
        store.write_documents(docs)
        for leaf in ({"field": "meta.n", "operator": ">", "value": 0}, {"field": "meta.u", "operator": "==", "value": 1}):
            for flt in (nest(16, leaf), nest(16, leaf, ops=("NOT",))):
                assert store.filter_documents(flt) == [d for d in docs if model(d, flt)]
            for depth in (17, 5000):
                with pytest.raises(FilterError):
                    store.filter_documents(nest(depth, leaf) if depth < 100 else deep_chain(depth, leaf))


def deep_chain(depth, leaf):
    for _ in range(depth):
        leaf = {"operator": "NOT", "conditions": [leaf]}
    return leaf


def test_iso_dates_compare_as_dates_on_declared_and_undeclared_fields():
    docs = [Document(id=str(i), content="x", meta={"when": w}) for i, w in
            enumerate(["1969-07-21T20:17:40", "1972-12-11 19:54:58", "1989-11-09T17:53:00+00:00", None])]
    for fields in ({"when": str}, None):
        store = HybridSearchDocumentStore("memory", embedding_dim=D, metadata_fields=fields)
        store.write_documents(docs)
        after = store.filter_documents({"field": "meta.when", "operator": ">", "value": "1970-01-01"})
        assert [d.id for d in after] == ["1", "2"]
        same = store.filter_documents({"field": "meta.when", "operator": "==", "value": "1972-12-11T19:54:58"})
        assert [d.id for d in same] == ["1"]  # the same instant written differently


# -- retrievers in a pipeline ----------------------------------------------------------------
def cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def bm25_model(docs, query):
    from tests.models import english_tokens
    by_id = {d.id: SimpleNamespace(content=d.content) for d in docs}
    return bm25_field(by_id, "content", english_tokens(query))


def check_ranked(got, ref, k):
    """Scores equal to the model's, descending, and the model's top k up to ties."""
    assert len(got) == min(k, len(ref))
    for d in got:
        assert math.isclose(d.score, ref[d.id], rel_tol=1e-4, abs_tol=1e-5), (d.id, d.score, ref[d.id])
    assert [d.score for d in got] == sorted((d.score for d in got), reverse=True)
    if got:
        kth = got[-1].score
        assert all(v <= kth + 1e-5 for i, v in ref.items() if i not in {d.id for d in got})


@pytest.mark.parametrize("kind", ["memory", "sqlite", "hnsw"])
def test_retrievers_in_a_pipeline(kind, tmp_path):
    """BM25 and embedding retrievers side by side in one Haystack pipeline, with a filter on a
    declared field: each returns the model's top k with its scores (documents without an
    embedding never come from the embedding retriever)."""
    docs = corpus(60, seed=3)
    store = open_store(kind, tmp_path)
    store.write_documents(docs)
    pipe = Pipeline()
    pipe.add_component("bm25", HybridSearchBM25Retriever(store, top_k=5))
    pipe.add_component("dense", HybridSearchEmbeddingRetriever(store, top_k=7, exact=True))
    q = [0.3, -0.2, 0.9, 0.1, -0.5, 0.4, 0.0, 0.7]
    flt = {"field": "meta.s", "operator": "in", "value": ["red", "blue"]}
    out = pipe.run({"bm25": {"query": "apple river", "filters": flt}, "dense": {"query_embedding": q, "filters": flt}})
    kept = [d for d in docs if model(d, flt)]
    lexical = bm25_model(docs, "apple river")  # collection statistics: every document, not the filtered ones
    check_ranked(out["bm25"]["documents"], {d.id: lexical[d.id] for d in kept if d.id in lexical}, 5)
    dense_ref = {d.id: cosine(d.embedding, q) for d in kept if d.embedding is not None}
    check_ranked(out["dense"]["documents"], dense_ref, 7)
    assert all(d.embedding is None for d in out["dense"]["documents"])  # return_embedding=False
    by_id = {d.id: d for d in docs}
    for d in out["bm25"]["documents"] + out["dense"]["documents"]:
        assert (d.content, d.meta) == (by_id[d.id].content, by_id[d.id].meta)
    full = store.embedding_retrieval(q, top_k=3, return_embedding=True, exact=True)
    assert all(d.embedding == by_id[d.id].embedding for d in full)  # exactly as written


def test_hybrid_retriever_fuses_like_the_model():
    docs = corpus(50, seed=5)
    store = HybridSearchDocumentStore("memory", embedding_dim=D)
    store.write_documents(docs)
    q = [0.1, 0.5, -0.3, 0.8, 0.2, -0.6, 0.4, 0.0]
    order = [d.id for d in docs]
    lists = [("text", bm25_model(docs, "cherry tiger"), False, 0.0),
             ("vector", {d.id: cosine(d.embedding, q) for d in docs if d.embedding is not None}, False, math.nan)]
    for fusion in ("rrf", "sum"):
        retriever = HybridSearchHybridRetriever(store, top_k=6, fusion=fusion)
        got = retriever.run(query="cherry tiger", query_embedding=q)["documents"]
        fused, _ = fusion_reference(order, lists, fusion)
        check_ranked(got, fused, 6)


def test_retriever_and_store_serialise_and_reopen_from_a_path(tmp_path):
    """A pipeline with two retrievers over one sqlite store dumps to YAML and loads back onto the
    same file (both components sharing the reopened store: a path takes one writer)."""
    docs = corpus(20, seed=9)
    store = open_store("sqlite", tmp_path)
    store.write_documents(docs)
    pipe = Pipeline()
    pipe.add_component("bm25", HybridSearchBM25Retriever(store, top_k=4, filters={"field": "meta.b", "operator": "==",
                                                                                  "value": True}))
    pipe.add_component("dense", HybridSearchEmbeddingRetriever(store, top_k=3))
    q = [0.5] * D
    before = pipe.run({"bm25": {"query": "stone paper"}, "dense": {"query_embedding": q}})
    text = pipe.dumps()
    store.close()
    # Haystack loads classes of trusted modules only
    again = Pipeline.loads(text, allowed_modules=["hybridsearch.integrations.haystack"])
    after = again.run({"bm25": {"query": "stone paper"}, "dense": {"query_embedding": q}})
    assert after == before and before["bm25"]["documents"] and before["dense"]["documents"]
    shared = again.get_component("bm25").document_store
    assert again.get_component("dense").document_store is shared
    shared.close()
    reopened = HybridSearchDocumentStore.from_dict(store.to_dict())  # the closed one is not handed back
    assert reopened is not shared and reopened.count_documents() == len(docs)
    reopened.close()


@pytest.mark.parametrize("kind", ["sqlite", "hnsw-path"])
def test_reopen_a_path_store(kind, tmp_path):
    docs = corpus(30, seed=11)
    store = open_store(kind, tmp_path)
    store.write_documents(docs)
    store.delete_documents(["d03"])
    store.close()
    reopened = open_store(kind, tmp_path)
    assert reopened.filter_documents() == [d for d in docs if d.id != "d03"]
    flt = {"field": "meta.n", "operator": ">=", "value": 1}
    assert reopened.filter_documents(flt) == [d for d in docs if d.id != "d03" and model(d, flt)]
    reopened.close()


def test_refused_writes_leave_the_store_as_it_was(tmp_path):
    """A wrong-dimension embedding, a value a declared column cannot hold, a duplicate under FAIL:
    a typed error and nothing of the batch written (the overwritten document keeps its old form)."""
    store = open_store("sqlite", tmp_path)
    first = [Document(id="a", content="one", meta={"n": 1}, embedding=[0.5] * D)]
    store.write_documents(first)
    bad_batches = [
        ([Document(id="a", content="changed", meta={"n": 2}), Document(id="b", content="two", embedding=[1.0] * (D + 1))],
         DuplicatePolicy.OVERWRITE, hs.SchemaError),
        ([Document(id="c", content="three", meta={"n": "3"})], DuplicatePolicy.FAIL, hs.SchemaError),
        ([Document(id="d", content="four", meta={"x": 2**60})], DuplicatePolicy.FAIL, hs.SchemaError),
        ([Document(id="e", content="five"), Document(id="a", content="dup")], DuplicatePolicy.FAIL,
         DuplicateDocumentError),
        ([Document(id="f", content="six"), Document(id="f", content="six again")], DuplicatePolicy.NONE,
         DuplicateDocumentError),
        (["not a document"], DuplicatePolicy.SKIP, hs.SchemaError),
    ]
    for batch, policy, error in bad_batches:
        with pytest.raises(error):
            store.write_documents(batch, policy=policy)
        assert store.filter_documents() == first
    assert store.write_documents([Document(id="a", content="x"), Document(id="g", content="y"),
                                  Document(id="g", content="z")], policy=DuplicatePolicy.SKIP) == 1
    assert [d.content for d in store.filter_documents()] == ["one", "y"]
    store.close()


def test_to_dict_never_writes_credentials(monkeypatch):
    """A store opened with credentials refuses to_dict (a pipeline's YAML would carry them in clear);
    plain URLs serialise. The remote storage is never reached: its opening is replaced."""
    class Unopened(hs.DocumentArray):
        def __init__(self, *args, **options):
            pass  # no node is contacted
    monkeypatch.setattr(hs, "DocumentArray", Unopened)
    plain = HybridSearchDocumentStore("elasticsearch", embedding_dim=D, hosts="http://127.0.0.1:9200", index="i")
    assert plain.to_dict()["init_parameters"]["hosts"] == "http://127.0.0.1:9200"
    for secret in [dict(api_key="k3y"), dict(basic_auth=("u", "pw")), dict(hosts="http://u:pw@127.0.0.1:9200"),
                   dict(hosts=["http://127.0.0.1:9200", "http://u:pw@127.0.0.1:9201"])]:
        store = HybridSearchDocumentStore("elasticsearch", embedding_dim=D, **{"hosts": "http://127.0.0.1:9200",
                                                                               **secret})
        with pytest.raises(hs.UnsupportedError) as e:
            store.to_dict()
        assert "pw" not in str(e.value) and "k3y" not in str(e.value)


def test_over_an_open_document_array_and_bad_configuration(tmp_path):
    store = open_store("memory", tmp_path)
    store.write_documents(corpus(5))
    wrapped = HybridSearchDocumentStore(store.document_array)
    assert wrapped.metadata_fields == {k: t.__name__ for k, t in DECLARED.items()}
    assert wrapped.filter_documents() == store.filter_documents()
    with pytest.raises(hs.UnsupportedError):
        wrapped.to_dict()

    class Other(hs.Document):
        title: hs.Text
    with pytest.raises(hs.ConfigError):
        HybridSearchDocumentStore(hs.DocumentArray(Other))
    for bad in [dict(embedding_dim=0), dict(metadata_fields={"meta": str}), dict(metadata_fields={"n": list}),
                dict(metadata_fields={"json": str}), dict(metadata_fields={"model_config": int}),
                dict(metadata_fields={"copy": int}), dict(metadata_fields={"a b": int}),
                dict(storage="nosuch")]:
        with pytest.raises(hs.ConfigError):
            HybridSearchDocumentStore(**bad)
    with pytest.raises(hs.ConfigError):
        HybridSearchBM25Retriever(store, top_k=0)


def test_importing_hybridsearch_does_not_import_haystack_and_a_missing_haystack_names_the_extra(tmp_path):
    code = ("import sys, hybridsearch\nassert 'haystack' not in sys.modules, 'imported haystack'\n"
            "from hybridsearch.integrations import haystack\n")
    done = run_without(tmp_path, ("haystack",), code)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "UnsupportedError" in last and 'pip install "hybridsearch[haystack]"' in last, done.stderr
    ok = run_without(tmp_path, (), "import sys, hybridsearch\nassert 'haystack' not in sys.modules\n")
    assert ok.returncode == 0, ok.stderr
    assert "haystack" in sys.modules  # this process imported it through the store


@pytest.mark.parametrize("policy", [DuplicatePolicy.FAIL, DuplicatePolicy.SKIP])
def test_concurrent_writes_of_the_same_ids_write_each_once(policy, tmp_path):
    """FAIL and SKIP read which ids are stored, then write: concurrent writers of the same ids
    (async calls run on worker threads) must not both pass the check. Exactly one writer writes
    each batch; the others raise DuplicateDocumentError (FAIL) or write nothing (SKIP)."""
    import asyncio
    store = open_store("sqlite", tmp_path)
    rounds = 8
    for r in range(rounds):
        batch = [Document(id=f"r{r}-{i}", content=f"doc {i}", embedding=[0.1 * (i + 1)] * D) for i in range(200)]

        async def race():
            return await asyncio.gather(*(store.write_documents_async(batch, policy=policy) for _ in range(4)),
                                        return_exceptions=True)
        results = asyncio.run(race())
        written = [x for x in results if x == len(batch)]
        assert len(written) == 1, results
        if policy is DuplicatePolicy.FAIL:
            assert all(isinstance(x, DuplicateDocumentError) for x in results if x != len(batch)), results
        else:
            assert results.count(0) == 3, results
    assert store.count_documents() == rounds * 200
    store.close()


def test_a_delete_during_update_by_filter_stays_deleted(tmp_path):
    """update_by_filter reads the matching documents, then writes them back: a delete running at
    the same time (async calls on worker threads) must not be undone by that write."""
    import asyncio
    store = open_store("memory", tmp_path)
    for r in range(6):
        docs = [Document(id=f"r{r}-{i}", content="x", meta={"u": i % 2}) for i in range(300)]
        store.write_documents(docs)
        doomed = [d.id for d in docs[::2]]

        async def race():
            await asyncio.gather(store.update_by_filter_async({"field": "meta.u", "operator": "in", "value": [0, 1]},
                                                              {"round": r}),
                                 store.delete_documents_async(doomed))
        asyncio.run(race())
        left = {d.id for d in store.filter_documents()}
        assert not left & set(doomed), sorted(left & set(doomed))[:5]
        store.delete_all_documents()
