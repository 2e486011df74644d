"""The LangChain VectorStore (hybridsearch.integrations.langchain) against langchain-tests'
standard VectorStoreIntegrationTests, unmodified, on the embedded storages and, when its node
answers, Elasticsearch (tests/engines.py: with HS_START_ENGINES=0 and no node it skips saying so).
Our own tests below cover what the standard suite does not: lexical and hybrid search, declared
vs undeclared metadata filters against a plain Python model, reopening a path= store, and a wrong
embedding dimension."""
import urllib.error
import urllib.request
import uuid

import pytest

pytest.importorskip("langchain_tests", reason='needs the test extra: pip install "hybridsearch[test]"')

from langchain_tests.integration_tests import VectorStoreIntegrationTests  # noqa: E402

from hybridsearch.integrations.langchain import HybridSearchVectorStore  # noqa: E402
from tests.engines import STORAGE_KIND, engine  # noqa: E402

# the standard suite's async tests are plain `async def`: pytest-asyncio runs them. The mark
# reaches its sync tests too, where pytest-asyncio only warns that it does nothing
pytestmark = [pytest.mark.asyncio,
              pytest.mark.filterwarnings("ignore:The test <Function .* is marked with '@pytest.mark.asyncio' but it is "
                                         "not an async function")]

STORAGES = ["memory", "hnsw", "sqlite", "elasticsearch"]


@pytest.fixture(params=STORAGES)
def store_options(request, tmp_path):
    """Factory: store_options() -> the storage= and options of a fresh, empty store."""
    storage, indexes = request.param, []

    def options() -> dict:
        if storage == "sqlite":
            return {"storage": "sqlite", "path": tmp_path / f"lc{uuid.uuid4().hex}.db"}
        if storage in STORAGE_KIND:  # a real node on 127.0.0.1, a fresh index
            url, why = engine(STORAGE_KIND[storage])
            if url is None:
                pytest.skip(f"no {storage} node: {why}")
            indexes.append(f"{url}/hs-lc-{uuid.uuid4().hex}")
            return {"storage": storage, "hosts": url, "index": indexes[-1].rsplit("/", 1)[1], "refresh": True}
        return {"storage": storage}

    yield options
    for index_url in indexes:
        try:
            urllib.request.urlopen(urllib.request.Request(index_url, method="DELETE"), timeout=60).close()
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise


class TestStandardSuite(VectorStoreIntegrationTests):
    """langchain-tests' suite as it ships: only the fixture it asks for."""

    @pytest.fixture
    def vectorstore(self, store_options):
        store = HybridSearchVectorStore(self.get_embeddings(), **store_options())
        try:
            yield store
        finally:
            store.close()


# --- beyond the standard suite ------------------------------------------------------------------
import math  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings  # noqa: E402
from langchain_core.vectorstores.utils import maximal_marginal_relevance  # noqa: E402

import hybridsearch as hs  # noqa: E402
from tests.hidden_modules import run_without  # noqa: E402
from tests.models import english_tokens, exact_scores, fusion_reference  # noqa: E402

DIM = 8
WORDS = ["apple", "river", "stone", "cloud", "lamp", "garden", "violin", "pepper", "tiger", "harbor"]
DECLARED = {"year": int, "genre": str, "price": float, "used": bool}
K1, B = 1.2, 0.75


def corpus(n: int = 40, seed: int = 7) -> list:
    """Documents with texts over a small vocabulary and metadata where some keys are missing or None."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(1, 7)))
        meta = {"year": int(rng.integers(1980, 2000)), "genre": str(rng.choice(["jazz", "rock", "folk"])),
                "price": float(rng.integers(0, 40)) / 4, "used": bool(rng.integers(0, 2)),
                "tags": [str(t) for t in rng.choice(WORDS, size=2, replace=False)], "title": f"Track {i:02d}"}
        for key in ("year", "genre", "price", "used"):
            roll = rng.random()
            if roll < 0.12:
                del meta[key]
            elif roll < 0.2:
                meta[key] = None
        docs.append(Document(id=f"d{i:02d}", page_content=" ".join(words), metadata=meta))
    return docs


def bm25(docs: list, query: str) -> dict:
    """Lucene's BM25 (k1=1.2, b=0.75) of one text field: id -> score for every document holding a query term."""
    toks = {d.id: english_tokens(d.page_content) for d in docs}
    toks = {i: t for i, t in toks.items() if t}
    avgdl = sum(map(len, toks.values())) / len(toks)
    out = {}
    for i, t in toks.items():
        s, hit = 0.0, False
        for q in english_tokens(query):
            tf = t.count(q)
            if tf:
                hit = True
                df = sum(1 for u in toks.values() if q in u)
                s += math.log(1 + (len(toks) - df + 0.5) / (df + 0.5)) * tf / (tf + K1 * (1 - B + B * len(t) / avgdl))
        if hit:
            out[i] = s
    return out


def cosine(docs: list, query: str, emb: Embeddings) -> dict:
    X = np.array(emb.embed_documents([d.page_content for d in docs]), dtype=np.float32)
    q = np.array(emb.embed_query(query), dtype=np.float32)
    return dict(zip([d.id for d in docs], exact_scores(X, q, "cosine")))


def like(pattern: str, value, flags: int = 0) -> bool:
    if not isinstance(value, str):
        return False
    body = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(body, value, flags | re.DOTALL) is not None


def model_matches(meta: dict, flt: dict) -> bool:
    """The filter semantics written plainly: a missing key or None matches only $ne, $nin and
    $exists False; values of different kinds are never equal or ordered."""
    def kind(v):
        return "bool" if isinstance(v, bool) else "num" if isinstance(v, (int, float)) else type(v).__name__

    def same(v, a):
        return v is not None and kind(v) == kind(a) and v == a

    def ordered(v, a):
        return v is not None and kind(v) == kind(a) and kind(v) in ("num", "str", "bool")

    def op(v, name, a):
        return {"$eq": lambda: same(v, a), "$ne": lambda: not same(v, a),
                "$in": lambda: any(same(v, x) for x in a), "$nin": lambda: not any(same(v, x) for x in a),
                "$exists": lambda: (v is not None) == a,
                "$gt": lambda: ordered(v, a) and v > a, "$gte": lambda: ordered(v, a) and v >= a,
                "$lt": lambda: ordered(v, a) and v < a, "$lte": lambda: ordered(v, a) and v <= a,
                "$between": lambda: ordered(v, a[0]) and a[0] <= v <= a[1],
                "$like": lambda: like(a, v), "$ilike": lambda: like(a, v, re.IGNORECASE),
                "$contains": lambda: (a in v) if isinstance(v, str) else isinstance(v, list) and any(
                    same(x, a) for x in v)}[name]()

    for key, cond in flt.items():
        if key == "$and":
            ok = all(model_matches(meta, f) for f in cond)
        elif key == "$or":
            ok = any(model_matches(meta, f) for f in cond)
        elif key == "$not":
            ok = not model_matches(meta, cond)
        else:
            ops = cond if isinstance(cond, dict) else {"$eq": cond}
            ok = all(op(meta.get(key), name, a) for name, a in ops.items())
        if not ok:
            return False
    return True


FILTERS = [
    {"genre": "jazz"},
    {"year": {"$gte": 1990, "$lt": 1995}},
    {"price": {"$lte": 4.5}, "used": True},
    {"genre": {"$in": ["rock", "folk"]}, "year": {"$ne": 1985}},
    {"genre": {"$nin": ["rock"]}},
    {"year": {"$exists": False}},
    {"$or": [{"genre": "folk"}, {"used": False}]},
    {"$not": {"genre": "jazz"}},
    {"$and": [{"year": {"$gt": 1983}}, {"$or": [{"price": {"$gt": 7.0}}, {"genre": {"$exists": False}}]}]},
    # operators our filter language lacks, and keys never declared: evaluated in Python
    {"year": {"$between": [1985, 1990]}},
    {"title": {"$like": "Track 1%"}},
    {"title": {"$ilike": "track _5"}, "genre": {"$ne": "rock"}},
    {"tags": {"$contains": "violin"}},
    {"$or": [{"tags": {"$contains": "apple"}}, {"year": {"$lt": 1982}}]},
    {"title": "Track 07"},
    {"genre": "jazz", "tags": {"$contains": "river"}},
]


def two_stores(store_options, docs):
    emb = DeterministicFakeEmbedding(size=DIM)
    declared = HybridSearchVectorStore(emb, metadata_fields=DECLARED, **store_options())
    undeclared = HybridSearchVectorStore(emb, **store_options())
    for store in (declared, undeclared):
        store.add_documents(docs)
    return emb, declared, undeclared


def test_lexical_search_is_bm25(store_options):
    docs = corpus()
    store = HybridSearchVectorStore(DeterministicFakeEmbedding(size=DIM), **store_options())
    store.add_documents(docs)
    for query in ("violin tiger", "apple apple harbor", "lamp"):
        ref = bm25(docs, query)
        got = store.similarity_search_with_score(query, k=len(docs), mode="lexical")
        assert sorted(doc.id for doc, _ in got) == sorted(ref), query
        for doc, score in got:
            assert score == pytest.approx(ref[doc.id], rel=1e-4), (query, doc.id)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    store.close()


@pytest.mark.parametrize("fusion", ["sum", "rrf"])
def test_hybrid_search_fuses_bm25_and_cosine(store_options, fusion):
    docs = corpus()
    emb = DeterministicFakeEmbedding(size=DIM)
    store = HybridSearchVectorStore(emb, **store_options())
    store.add_documents(docs)
    query = "garden pepper"
    text, vec = bm25(docs, query), cosine(docs, query, emb)
    order = [d.id for d in docs]
    fused, _ = fusion_reference(order, [("text", text, False, 0.0), ("vector", vec, False, math.nan)], fusion)
    got = store.similarity_search_with_score(query, k=10, mode="hybrid", fusion=fusion)
    assert len(got) == 10
    ranked = sorted(fused.values(), reverse=True)
    for (doc, score), want in zip(got, ranked):  # the k best fused scores, each the doc's own
        assert score == pytest.approx(fused[doc.id], abs=1e-4)
        assert score == pytest.approx(want, abs=1e-4)
    store.close()


def test_declared_and_undeclared_filters_answer_alike(store_options):
    docs = corpus()
    emb, declared, undeclared = two_stores(store_options, docs)
    for flt in FILTERS:
        want = {d.id for d in docs if model_matches(d.metadata, flt)}
        for store in (declared, undeclared):
            for mode in ("vector", "lexical", "hybrid"):
                query = " ".join(WORDS) if mode == "lexical" else "stone cloud"  # every doc holds a word
                got = store.similarity_search(query, k=len(docs), filter=flt, mode=mode)
                assert {d.id for d in got} == want, (flt, mode, store is declared)
        # a filtered vector search is a pre-filter: its k best are the k best of the matching docs
        vec = cosine([d for d in docs if d.id in want], "stone cloud", emb)
        top = sorted(vec.values(), reverse=True)[:3]
        got = [s for _, s in declared.similarity_search_with_score("stone cloud", k=3, filter=flt)]
        assert got == pytest.approx(top, abs=1e-3), flt
    declared.close()
    undeclared.close()


def test_delete_by_filter_declared_and_undeclared(store_options):
    docs = corpus(20)
    _, declared, undeclared = two_stores(store_options, docs)
    flt = {"$or": [{"genre": "jazz"}, {"title": {"$like": "%3"}}]}
    keep = sorted(d.id for d in docs if not model_matches(d.metadata, flt))
    for store in (declared, undeclared):
        store.delete(filter=flt)
        assert sorted(d.id for d in store.get_by_ids([d.id for d in docs])) == keep
        store.delete()  # no ids, no filter: every document, as LangChain's delete(None)
        assert store.get_by_ids([d.id for d in docs]) == []
        store.close()


def test_unknown_operator_and_bad_values_are_typed_errors(store_options):
    _, declared, undeclared = two_stores(store_options, corpus(5))
    for store in (declared, undeclared):
        with pytest.raises(hs.FilterError, match=r"\$regex"):
            store.similarity_search("apple", filter={"genre": {"$regex": "j.*"}})
        with pytest.raises(hs.FilterError):
            store.similarity_search("apple", filter=["genre", "jazz"])
    with pytest.raises(hs.FilterError):  # a declared int compared with a string
        declared.similarity_search("apple", filter={"year": {"$gt": "1990"}})
    with pytest.raises(hs.ConfigError, match="mode"):
        declared.similarity_search("apple", mode="semantic")
    declared.close()
    undeclared.close()


def test_relevance_scores_and_mmr(store_options):
    docs = corpus(30)
    emb = DeterministicFakeEmbedding(size=DIM)
    store = HybridSearchVectorStore(emb, **store_options())
    store.add_documents(docs)
    vec = cosine(docs, "tiger lamp", emb)
    got = store.similarity_search_with_relevance_scores("tiger lamp", k=5)
    assert [r for _, r in got] == pytest.approx(sorted(((1 + s) / 2 for s in vec.values()), reverse=True)[:5],
                                                abs=1e-3)
    assert all(0.0 <= r <= 1.0 for _, r in got)
    with pytest.raises(hs.UnsupportedError, match="lexical"):
        store.similarity_search_with_relevance_scores("tiger lamp", k=5, mode="lexical")
    # MMR: LangChain's own selection over the exact fetch_k nearest documents
    fetch = sorted(vec, key=lambda i: -vec[i])[:10]
    by_id = {d.id: d for d in docs}
    X = np.array(emb.embed_documents([by_id[i].page_content for i in fetch]), dtype=np.float32)
    q = np.array(emb.embed_query("tiger lamp"), dtype=np.float32)
    want = [fetch[j] for j in maximal_marginal_relevance(q, X, lambda_mult=0.3, k=4)]
    got = store.max_marginal_relevance_search("tiger lamp", k=4, fetch_k=10, lambda_mult=0.3)
    assert [d.id for d in got] == want
    store.close()


def test_retriever_hybrid_and_from_texts(store_options):
    emb = DeterministicFakeEmbedding(size=DIM)
    options = store_options()
    store = HybridSearchVectorStore.from_texts(["red violin", "blue harbor", "green garden"], emb,
                                               metadatas=[{"genre": "a"}, {"genre": "b"}, {"genre": "a"}],
                                               ids=["r", "b", "g"], metadata_fields={"genre": str}, **options)
    retriever = store.as_retriever(search_kwargs={"k": 2, "mode": "lexical", "filter": {"genre": "a"}})
    assert [d.id for d in retriever.invoke("violin garden")] in (["r", "g"], ["g", "r"])
    assert [d.id for d in retriever.invoke("harbor")] == []
    # hybrid: the filter's documents ranked by the model's fusion of BM25 and cosine (review: the
    # lexical case alone left mode="hybrid" through a retriever untested)
    docs = store.get_by_ids(["r", "b", "g"])
    allowed = [d for d in docs if d.metadata["genre"] == "a"]
    for query in ("violin garden", "harbor", "red"):
        keep = {d.id for d in allowed}  # BM25's statistics are the whole collection's; the filter keeps these
        text = {i: s for i, s in bm25(docs, query).items() if i in keep}
        fused, _ = fusion_reference([d.id for d in allowed], [("text", text, False, 0.0),
                                                              ("vector", cosine(allowed, query, emb), False,
                                                               math.nan)], "sum")
        hybrid = store.as_retriever(search_kwargs={"k": 2, "mode": "hybrid", "filter": {"genre": "a"}})
        got = [d.id for d in hybrid.invoke(query)]
        assert sorted(got) == sorted(fused), query  # both documents of genre "a", whatever BM25 says
        assert fused[got[0]] >= fused[got[1]] - 1e-5, query
    store.close()


class Wrong(Embeddings):
    """An embedding model whose vector for the text "bad" has one dimension too few."""

    def embed_documents(self, texts):
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text):
        return DeterministicFakeEmbedding(size=DIM).embed_query(text)[:DIM - (text == "bad")]


def test_wrong_dimension_is_typed_and_writes_nothing(store_options):
    store = HybridSearchVectorStore(Wrong(), **store_options())
    store.add_texts(["kept"], [{"genre": "x"}], ids=["k"])
    with pytest.raises(hs.EmbeddingError, match="shape"):
        store.add_texts(["fine", "bad"], ids=["k", "new"])  # would overwrite k and add new
    assert [(d.id, d.page_content) for d in store.get_by_ids(["k", "new"])] == [("k", "kept")]
    with pytest.raises(hs.EmbeddingError):
        store.similarity_search("bad")
    with pytest.raises(hs.SchemaError):
        store.similarity_search_by_vector([0.1] * (DIM + 1))
    store.close()


def test_declared_metadata_of_another_type_writes_nothing(store_options):
    store = HybridSearchVectorStore(DeterministicFakeEmbedding(size=DIM), metadata_fields=DECLARED,
                                    **store_options())
    with pytest.raises(hs.SchemaError, match="'year' is declared int"):
        store.add_texts(["one", "two"], [{"year": 1990}, {"year": "1991"}])
    with pytest.raises(hs.SchemaError, match="'used' is declared bool"):
        store.add_texts(["one"], [{"used": 1}])
    assert store.similarity_search("one", k=5) == []
    store.close()


@pytest.mark.parametrize("storage", ["memory", "hnsw", "sqlite"])
def test_reopen_path_store(tmp_path, storage):
    docs = corpus(12)
    emb = DeterministicFakeEmbedding(size=DIM)
    path = tmp_path / ("store.db" if storage == "sqlite" else "store")
    with HybridSearchVectorStore(emb, storage=storage, path=path, metadata_fields=DECLARED) as store:
        store.add_documents(docs)
        store.delete(["d03"])
        before = store.similarity_search_with_score("river lamp", k=5, mode="hybrid", filter={"genre": "rock"})
    with HybridSearchVectorStore(emb, storage=storage, path=path, metadata_fields=DECLARED) as store:
        want = [d for d in docs if d.id != "d03"]
        assert store.get_by_ids([d.id for d in docs]) == want
        after = store.similarity_search_with_score("river lamp", k=5, mode="hybrid", filter={"genre": "rock"})
        assert [d for d, _ in after] == [d for d, _ in before]
        assert [s for _, s in after] == pytest.approx([s for _, s in before], abs=1e-5)


def test_open_collection_is_adopted_or_refused():
    emb = DeterministicFakeEmbedding(size=DIM)

    class Fits(hs.Document):
        text: hs.Text
        embedding: hs.Vector[DIM]
        metadata: dict = {}
        genre: hs.Keyword | None = None

    class Other(hs.Document):
        body: hs.Text
        embedding: hs.Vector[DIM]

    with hs.DocumentArray(Fits) as da:
        store = HybridSearchVectorStore(emb, collection=da)
        store.add_texts(["jazz night"], [{"genre": "jazz", "year": 1990}], ids=["j"])
        assert da["j"].genre == "jazz"
        assert [d.id for d in store.similarity_search("x", filter={"genre": "jazz", "year": 1990})] == ["j"]
        store.close()  # the caller's collection stays open
        assert len(da) == 1
    with hs.DocumentArray(Other) as da, pytest.raises(hs.ConfigError, match="does not fit"):
        HybridSearchVectorStore(emb, collection=da)
    with pytest.raises(hs.ConfigError, match="reserved"):
        HybridSearchVectorStore(emb, metadata_fields={"text": str})
    with pytest.raises(hs.ConfigError, match="str, int, float or bool"):
        HybridSearchVectorStore(emb, metadata_fields={"tags": list})


def test_import_without_langchain_names_the_extra(tmp_path):
    proc = run_without(tmp_path, ("langchain_core",), (
        "import sys, hybridsearch as hs\n"
        "assert 'langchain_core' not in sys.modules\n"
        "try:\n"
        "    import hybridsearch.integrations.langchain\n"
        "except hs.UnsupportedError as e:\n"
        "    print(e)\n"))
    assert proc.returncode == 0, proc.stderr
    assert 'pip install "hybridsearch[langchain]"' in proc.stdout


def test_docs_page_without_langchain_is_skipped_naming_the_extra(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.hidden_modules import env_without
    root = Path(__file__).resolve().parents[2]
    work, result = tmp_path / "work", tmp_path / "result.json"
    work.mkdir()
    subprocess.run([sys.executable, str(root / "tests" / "docs" / "run_blocks.py"),
                    str(root / "docs" / "integrations" / "langchain.md"), "langchain.md", str(result)],
                   cwd=work, env=env_without(tmp_path, ("langchain_core",)), capture_output=True, timeout=300)
    got = json.loads(result.read_text())
    assert got["status"] == "skipped", got
    assert "hybridsearch[langchain]" in got["reason"] and "langchain_core" in got["reason"], got


def test_metadata_is_not_shared_with_the_caller(store_options):
    store = HybridSearchVectorStore(DeterministicFakeEmbedding(size=DIM), **store_options())
    given = {"tags": ["a"], "nested": {"n": 1}}
    store.add_texts(["x"], [given], ids=["x"])
    given["tags"].append("changed after add")
    got = store.get_by_ids(["x"])[0]
    got.metadata["nested"]["n"] = 2
    got.metadata["tags"].append("changed after read")
    assert store.get_by_ids(["x"])[0].metadata == {"tags": ["a"], "nested": {"n": 1}}
    store.close()


async def test_async_relevance_scores_follow_the_sync_rules(store_options):
    docs = corpus(10)
    store = HybridSearchVectorStore(DeterministicFakeEmbedding(size=DIM), **store_options())
    await store.aadd_documents(docs)
    assert await store.asimilarity_search_with_relevance_scores("tiger", k=3) == \
        store.similarity_search_with_relevance_scores("tiger", k=3)
    with pytest.raises(hs.UnsupportedError, match="lexical"):
        await store.asimilarity_search_with_relevance_scores("tiger", k=3, mode="lexical")
    got = await store.asimilarity_search("tiger apple", k=3, mode="lexical", filter={"title": {"$like": "Track 0%"}})
    assert [d.id for d in got] == [d.id for d in store.similarity_search("tiger apple", k=3, mode="lexical",
                                                                         filter={"title": {"$like": "Track 0%"}})]
    store.close()


def test_argument_mistakes_are_config_errors_and_write_nothing():
    store = HybridSearchVectorStore(DeterministicFakeEmbedding(size=DIM))
    with pytest.raises(hs.ConfigError, match="2 texts, 1 metadatas"):
        store.add_texts(["a", "b"], [{}])
    with pytest.raises(hs.ConfigError, match="ids"):
        store.add_texts(["a", "b"], ids=["only-one"])
    with pytest.raises(hs.ConfigError, match="unknown arguments"):
        store.add_texts(["a"], upsert=False)
    with pytest.raises(hs.ConfigError, match="not both"):
        store.delete(["a"], filter={"genre": "x"})
    assert store.get_by_ids(["a", "b", "only-one"]) == [] and len(store.collection) == 0
    with pytest.raises(hs.ConfigError, match="embedding= .* or dimension="):
        HybridSearchVectorStore(None)
    with pytest.raises(hs.ConfigError, match="unknown|storage"):
        HybridSearchVectorStore(DeterministicFakeEmbedding(size=DIM), storage="nosuch")
