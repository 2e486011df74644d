"""find(text=...) and hybrid search against plain-Python models of best-fields BM25, score-sum and RRF.

The models tokenize with tests/models.py's english_tokens (lowercase, ASCII words, Snowball English
through PyStemmer), written apart from the engine's analyzer; the vocabulary here is ASCII.

Elasticsearch and OpenSearch analyse text with their `standard` analyzer (lowercased words, no
stemming): there the collection is a PlainProduct and the same models tokenize with plain_tokens.
Their BM25 is Lucene's, which the models compute exactly for these documents (fewer than 24 tokens
a field, so Lucene's one-byte length norms are exact; one shard) as long as no document was
deleted or overwritten: Lucene's statistics (N, df, average length) count those until a merge
drops them, which the engines' retention of soft deletes puts off (docs/storages/elasticsearch.md).
After such writes the hits there are held to the model's matches (`assert_hits_match`)."""
import math
import re
from typing import Annotated, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import STORAGES
from tests.models import english_tokens

TEXT_STORAGES = ["memory", "memory-path", "hnsw", "hnsw-path", "sqlite", "elasticsearch", "opensearch", "weaviate",
                 "qdrant", "elasticsearch-cluster", "opensearch-cluster"]
# collections opened by conftest's make_da, on real nodes
REMOTE = ("elasticsearch", "opensearch", "weaviate", "elasticsearch-cluster", "opensearch-cluster")
FIXTURES = [HealthCheck.function_scoped_fixture]  # make_da opens a fresh collection per example
K1, B = 1.2, 0.75
WORDS = ("red blue green phone phones case cases running runner charger cable fast slow nokia apple "
         "samsung galaxy pixel screen glass cover leather wallet battery power bank usb wireless").split()


class Product(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    category: hs.Keyword = "a"
    price: int = 0
    embedding: hs.Vector[8]


PLAIN = hs.Analyzer(stemmer=None)


class PlainProduct(hs.Document):
    """Product as the search engines' `standard` analyzer indexes it: no stemming."""

    title: Annotated[hs.Text, PLAIN]
    description: Annotated[hs.Text, PLAIN] = ""
    category: hs.Keyword = "a"
    price: int = 0
    embedding: hs.Vector[8]


def plain_tokens(text) -> list:
    """The terms of an ASCII text without stemming: lowercased runs of letters and digits."""
    return re.findall(r"[a-z0-9]+", (text or "").lower())


def weaviate_tokens(text) -> list:
    """plain_tokens, for a model of Weaviate's BM25: its idf counts every object of the
    collection (N), where Lucene counts the documents holding a term in the field
    (docs/storages/weaviate.md); the average length is over the non-empty values in both."""
    return plain_tokens(text)


weaviate_tokens.count_every_document = True


def schema_and_tokens(storage) -> tuple:
    """(the schema to open on `storage`, the models' tokenizer for it)."""
    if storage == "weaviate":
        return PlainProduct, weaviate_tokens
    return (PlainProduct, plain_tokens) if storage in REMOTE else (Product, english_tokens)


def bm25_field(docs, field, query_tokens, tokens=english_tokens):
    """BM25 of one field for every doc id (Lucene's formula with exact lengths; N every
    document when the tokenizer says `count_every_document`)."""
    toks = {i: tokens(getattr(d, field)) for i, d in docs.items()}
    every = len(toks)
    toks = {i: t for i, t in toks.items() if t}
    n = every if getattr(tokens, "count_every_document", False) else len(toks)
    out = {}
    if not toks:
        return out
    avgdl = sum(len(t) for t in toks.values()) / len(toks)
    for i, t in toks.items():
        s, hit = 0.0, False
        for q in query_tokens:
            tf = t.count(q)
            if tf:
                hit = True
                df = sum(1 for u in toks.values() if q in u)
                s += math.log(1 + (n - df + 0.5) / (df + 0.5)) * tf / (tf + K1 * (1 - B + B * len(t) / avgdl))
        if hit:
            out[i] = s
    return out


def best_fields(docs, text, tokens=english_tokens):
    q = tokens(text)
    out = {}
    for field in ("title", "description"):
        for i, s in bm25_field(docs, field, q, tokens).items():
            out[i] = max(out.get(i, 0.0), s)
    return out


def cosine(a, b):
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else 0.0


def assert_topk(res, ref, k):
    """Scores equal to the model's; the set is the model's top-k up to ties."""
    assert len(res) == min(k, len(ref))
    for i, s in zip(res.ids, res.scores):
        assert math.isclose(float(s), ref[i], rel_tol=1e-4, abs_tol=1e-6), (i, s, ref[i])
    if len(res):
        kth = float(res.scores[-1])
        assert all(v <= kth * (1 + 1e-4) + 1e-6 for i, v in ref.items() if i not in set(res.ids))
    assert list(res.scores) == sorted(res.scores, reverse=True)


def assert_hits_match(res, ref, k):
    """Where BM25 statistics legitimately differ from the model's (a search engine's after deletes
    and overwrites): as many hits as the model, each one a match of the model, best first."""
    assert len(res) == min(k, len(ref))
    assert set(res.ids) <= set(ref), set(res.ids) - set(ref)
    assert list(res.scores) == sorted(res.scores, reverse=True)


def random_docs(rng, n):
    out = []
    for i in range(n):
        out.append({"id": f"p{i}", "title": " ".join(rng.choice(WORDS, rng.integers(1, 8))),
                    "description": " ".join(rng.choice(WORDS, rng.integers(0, 20))),
                    "category": "ab"[i % 2], "price": i, "embedding": rng.standard_normal(8)})
    return out


@pytest.fixture(params=TEXT_STORAGES)
def storage(request):
    """The storages with text search (this module's; conftest's covers every storage)."""
    return request.param


@pytest.fixture
def da(make_da, storage):
    return make_da(schema_and_tokens(storage)[0])


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURES)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 15))
@pytest.mark.parametrize("storage", TEXT_STORAGES)
def test_bm25_best_fields_matches_the_model_through_writes(make_da, storage, seed, k):
    rng = np.random.default_rng(seed)
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    da.extend(random_docs(rng, 60))
    for step in range(4):
        docs = {d.id: d for d in da}
        check = assert_topk if step == 0 or storage not in REMOTE else assert_hits_match
        for _ in range(3):
            text = " ".join(rng.choice(WORDS + ["unknownword", "Phones!", "RUNNING"], rng.integers(1, 6)))
            check(da.find(text=text, limit=k), best_fields(docs, text, tokens), k)
            assert da.count(text=text) == len(best_fields(docs, text, tokens))
            flt = {"category": "a"}
            ref = {i: v for i, v in best_fields(docs, text, tokens).items() if docs[i].category == "a"}
            res = da.find(text=text, limit=k, filter=flt)
            check(res, ref, k)
            assert all(d.category == "a" for d in res.docs)
        # writes between queries: deletes, partial text updates, upserts, new docs
        ids = [d.id for d in da]
        da.delete(list(rng.choice(ids, 8, replace=False)))
        left = [d.id for d in da]
        da.update(left[0], title="red phone case")
        da.update(left[1], price=-1)  # not a text field
        da.extend(random_docs(rng, 70)[60 + step * 2: 62 + step * 2])
    da.close()


def test_repeated_query_terms_count_per_occurrence(da, storage):
    da.extend([{"id": "a", "title": "red phone", "embedding": np.ones(8)},
               {"id": "b", "title": "blue phone case", "embedding": np.ones(8)},
               {"id": "c", "title": "red red cable", "embedding": np.ones(8)}])
    docs = {d.id: d for d in da}
    once, twice = da.find(text="red case"), da.find(text="red red case")
    assert_topk(twice, best_fields(docs, "red red case", schema_and_tokens(storage)[1]), 10)
    assert twice.scores[twice.ids.index("a")] == pytest.approx(2 * once.scores[once.ids.index("a")], rel=1e-5)


def test_stemming_and_case_fold_match(da, storage):
    da.extend([{"id": "a", "title": "Running Phones", "embedding": np.ones(8)}])
    assert da.find(text="running PHONES").ids == ["a"]
    # the engines' standard analyzer does not stem (docs/storages/elasticsearch.md)
    assert da.find(text="run phone").ids == ([] if storage in REMOTE else ["a"])
    assert da.find(text="zzz").ids == [] and da.find(text="").ids == []


def hybrid_reference(docs, text, q, fusion, candidates=100, rrf_k=60, tokens=english_tokens, exact=False,
                     allowed=None, weights=(0.5, 0.5), similarity=None) -> tuple:
    """API.md section 4 (third edition) and 8: (fused, text part, vector part), each id -> score.

    Candidates: the lexical top-`candidates` by BM25 and the vector top-`candidates` among the
    `allowed` ids (None: all; a filter), ties to the earlier-inserted document (the order of
    `docs`); with exact=True the lexical side of "sum" and "linear" is every lexical match (the
    first edition). "sum"/"linear" score every candidate on both parts (BM25 0 without a query
    term; a document without a vector as the zero vector); "rrf" ranks the two lists and a part
    is NaN where the hit is not on that list. BM25 statistics are the whole collection's."""
    similarity = similarity or (lambda v: cosine(v, q) if v is not None else 0.0)
    pos = {i: n for n, i in enumerate(docs)}
    ids = [i for i in docs if allowed is None or i in allowed]
    bm_all = best_fields(docs, text, tokens)
    bm = {i: bm_all[i] for i in ids if i in bm_all}
    vec = {i: similarity(docs[i].embedding) for i in ids}
    with_vec = [i for i in ids if docs[i].embedding is not None]
    vtop = sorted(with_vec, key=lambda i: (-vec[i], pos[i]))[:candidates]
    ltop = sorted(bm, key=lambda i: (-bm[i], pos[i]))[:candidates]
    if fusion == "rrf":
        fused: dict = {}
        for ranked in (ltop, vtop):
            for r, i in enumerate(ranked, start=1):
                fused[i] = fused.get(i, 0.0) + 1 / (rrf_k + r)
        return (fused, {i: bm[i] if i in ltop else math.nan for i in fused},
                {i: vec[i] if i in vtop else math.nan for i in fused})
    cand = (set(bm) if exact else set(ltop)) | set(vtop)
    t = {i: bm.get(i, 0.0) for i in cand}
    v = {i: vec[i] for i in cand}
    if fusion == "sum":
        return {i: t[i] + v[i] for i in cand}, t, v

    def norm(raw):
        lo, hi = min(raw.values()), max(raw.values())
        return {i: (1.0 if x != 0 else 0.0) if hi == lo else (x - lo) / (hi - lo) for i, x in raw.items()}

    tn, vn = (norm(t), norm(v)) if cand else ({}, {})
    return {i: weights[0] * tn[i] + weights[1] * vn[i] for i in cand}, t, v


def hybrid_model(docs, text, q, k, fusion, candidates=100, rrf_k=60, tokens=english_tokens, exact=False):
    """The fused score of each candidate (hybrid_reference)."""
    return hybrid_reference(docs, text, q, fusion, candidates, rrf_k, tokens, exact)[0]


@pytest.mark.parametrize("fusion", ["sum", "rrf"])
@pytest.mark.parametrize("candidates", [5, 100])
def test_hybrid_matches_the_fusion_model(da, storage, fusion, candidates):
    rng = np.random.default_rng(11)
    tokens = schema_and_tokens(storage)[1]
    da.extend(random_docs(rng, 150))
    docs = {d.id: d for d in da}
    for _ in range(8):
        text = " ".join(rng.choice(WORDS, rng.integers(1, 5)))
        q = rng.standard_normal(8)
        res = da.find(text=text, vector=q, fusion=fusion, candidates=candidates, limit=10, exact=True)
        assert_topk(res, hybrid_model(docs, text, q, 10, fusion, candidates, tokens=tokens, exact=True), 10)
        # filters apply to both sides
        flt = {"price": {"$lt": 50}}
        sub = {i: d for i, d in docs.items() if d.price < 50}
        res = da.find(text=text, vector=q, fusion=fusion, candidates=candidates, limit=10, exact=True, filter=flt)
        if fusion == "sum":  # BM25 statistics are the whole collection's, not the filtered subset's
            bm = best_fields(docs, text, tokens)
            vec = {i: cosine(d.embedding, q) for i, d in sub.items()}
            vtop = sorted(vec, key=lambda i: (-vec[i], int(i[1:])))[:candidates]
            ref = {i: bm.get(i, 0.0) + vec[i] for i in set(vtop) | (set(bm) & set(sub))}
        else:
            bm = {i: v for i, v in best_fields(docs, text, tokens).items() if i in sub}
            vec = {i: cosine(d.embedding, q) for i, d in sub.items()}
            ltop = sorted(bm, key=lambda i: (-bm[i], int(i[1:])))[:candidates]
            vtop = sorted(vec, key=lambda i: (-vec[i], int(i[1:])))[:candidates]
            ref = {}
            for ranked in (ltop, vtop):
                for r, i in enumerate(ranked, start=1):
                    ref[i] = ref.get(i, 0.0) + 1 / (60 + r)
        assert_topk(res, ref, 10)
        assert all(d.price < 50 for d in res.docs)


def test_text_search_needs_a_text_field():
    class V(hs.Document):
        v: hs.Vector[2]
    da = hs.DocumentArray(V, storage="memory")
    with pytest.raises(hs.UnsupportedError):
        da.find(text="x")


def test_text_survives_compaction_and_reopen(tmp_path):
    rng = np.random.default_rng(5)
    da = hs.DocumentArray(Product, storage="memory")
    da.extend(random_docs(rng, 3000))
    da.delete([f"p{i}" for i in range(2500)])  # forces the memory storage to compact
    docs = {d.id: d for d in da}
    assert_topk(da.find(text="red phone", limit=10), best_fields(docs, "red phone"), 10)
    path = tmp_path / "col"
    h = hs.DocumentArray(Product, storage="hnsw", path=path)
    h.extend(random_docs(rng, 200))
    h.delete(["p3"])
    h.update("p4", title="wireless charger")
    h.close()
    again = hs.DocumentArray(Product, storage="hnsw", path=path)
    docs = {d.id: d for d in again}
    assert_topk(again.find(text="wireless charger", limit=10), best_fields(docs, "wireless charger"), 10)
    again.close()


# ------------------------------------------------- API.md section 8: linear fusion, field weights
def linear_model(docs, text, q, w_text, w_vec, candidates=100, tokens=english_tokens, exact=False):
    """fusion="linear": the candidates of "sum", each part min-max normalised over them."""
    return hybrid_reference(docs, text, q, "linear", candidates, tokens=tokens, exact=exact,
                            weights=(w_text, w_vec))[0]


def _filled(make_da, storage, seed):
    """(rng, collection of 50 random products, id -> document, a 1-3 word query)."""
    rng = np.random.default_rng(seed)
    da = make_da(schema_and_tokens(storage)[0])
    da.extend(random_docs(rng, 50))
    return rng, da, {d.id: d for d in da}, " ".join(rng.choice(WORDS, rng.integers(1, 4)))


@settings(max_examples=20, deadline=None, suppress_health_check=FIXTURES)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12), w=st.floats(0, 1), candidates=st.integers(1, 40))
@pytest.mark.parametrize("storage", TEXT_STORAGES)
def test_linear_fusion_matches_the_model(make_da, storage, seed, k, w, candidates):
    rng, da, docs, text = _filled(make_da, storage, seed)
    tokens = schema_and_tokens(storage)[1]
    q = rng.standard_normal(8)
    weights = {"text": w, "vector": 1 - w} if w < 1 else {"text": 1.0}
    res = da.find(text=text, vector=q, fusion="linear", weights=weights, limit=k, candidates=candidates,
                  exact=True)
    assert_topk(res, linear_model(docs, text, q, weights.get("text", 0.0), weights.get("vector", 0.0), candidates,
                                  tokens, exact=True), k)
    default = da.find(text=text, vector=q, fusion="linear", limit=k, exact=True, candidates=candidates)
    assert_topk(default, linear_model(docs, text, q, 0.5, 0.5, candidates, tokens, exact=True), k)
    da.close()


@settings(max_examples=20, deadline=None, suppress_health_check=FIXTURES)
@given(seed=st.integers(0, 2**32 - 1), wt=st.floats(0.1, 5), wd=st.floats(0.1, 5), only=st.booleans())
@pytest.mark.parametrize("storage", TEXT_STORAGES)
def test_text_fields_weight_each_field_before_the_best_wins(make_da, storage, seed, wt, wd, only):
    _, da, docs, text = _filled(make_da, storage, seed)
    tokens = schema_and_tokens(storage)[1]
    qt = tokens(text)
    fields = {"title": wt} if only else {"title": wt, "description": wd}
    ref: dict = {}
    for field, weight in fields.items():
        for i, s in bm25_field(docs, field, qt, tokens).items():
            ref[i] = max(ref.get(i, 0.0), weight * s)
    assert_topk(da.find(text=text, text_fields=fields, limit=10), ref, 10)
    assert da.count(text=text, text_fields=fields) == len(ref)
    assert da.find(text=text, text_fields=fields, limit=3).total == len(ref)
    da.close()


@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURES)
@given(seed=st.integers(0, 2**32 - 1), cut=st.floats(-1, 3))
@pytest.mark.parametrize("storage", TEXT_STORAGES)
def test_min_score_keeps_the_hits_scoring_at_least_it(make_da, storage, seed, cut):
    rng = np.random.default_rng(seed)
    da = make_da(schema_and_tokens(storage)[0])
    da.extend(random_docs(rng, 40))
    q = rng.standard_normal(8)
    for kwargs in ({"text": "red phone case"}, {"vector": q, "exact": True}, {"text": "red cable", "vector": q}):
        full = da.find(limit=40, **kwargs)
        got = da.find(limit=40, min_score=cut, **kwargs)
        assert got.ids == [i for i, s in zip(full.ids, full.scores) if s >= cut] and got.total is None
    da.close()


def test_fusion_options_are_checked(da):
    da.extend(random_docs(np.random.default_rng(0), 5))
    q = np.ones(8)
    for bad in ({"text": -1}, {"text": float("nan")}, {"txt": 1}, {"text": 0, "vector": 0}, [0.5, 0.5]):
        with pytest.raises(hs.ConfigError):
            da.find(text="red", vector=q, fusion="linear", weights=bad)
    with pytest.raises(hs.ConfigError):
        da.find(text="red", vector=q, fusion="sum", weights={"text": 1})
    for bad in ({"price": 1}, {"nope": 1}, {"title": 0}, {"title": float("inf")}, {}):
        with pytest.raises(hs.ConfigError):
            da.find(text="red", text_fields=bad)
    with pytest.raises(hs.ConfigError):
        da.find(text_fields={"title": 1}, filter={})
    with pytest.raises(hs.ConfigError):
        da.find(filter={}, min_score=1)
    with pytest.raises(hs.ConfigError):
        da.find(text="red", min_score="high")


# ------------------------------------------ storages without text search refuse it, saying why
NO_TEXT = {"hnswlib": "hnswlib has no lexical index", "annlite": "AnnLite has no lexical engine"}


@pytest.mark.parametrize("storage", [s for s in NO_TEXT if s in STORAGES])  # annlite: in its child process
def test_storages_without_text_search_refuse_every_text_option_saying_why(make_da, storage):
    da = make_da(Product)
    da.extend(random_docs(np.random.default_rng(0), 10))
    q = np.ones(8)
    text_calls = {
        "find": lambda: da.find(text="red phone"), "page": lambda: da.find(text="red", limit=3, offset=3),
        "hybrid": lambda: da.find(text="red", vector=q), "rrf": lambda: da.find(text="red", vector=q, fusion="rrf"),
        "linear": lambda: da.find(text="red", vector=q, fusion="linear", weights={"text": 1.0}),
        "text_fields": lambda: da.find(text="red", text_fields={"title": 2.0}),
        "syntax": lambda: da.find(text='"red phone" +case'),
        "operator": lambda: da.count(text="red phone", operator="and"),
        "min_score": lambda: da.find(text="red", min_score=0.5),
        "count": lambda: da.count(text="red"), "facets": lambda: da.facets("category", text="red"),
        "sort": lambda: da.find(text="red", sort=[("price", "asc")]),
    }
    for name, call in text_calls.items():
        with pytest.raises(hs.UnsupportedError) as refused:
            call()
        assert repr(storage) in str(refused.value) and NO_TEXT[storage] in str(refused.value), (name, refused.value)
    # the same options without text still answer
    assert len(da.find(vector=q, limit=3, min_score=-1.0)) == 3
    assert da.count(filter={"category": "a"}) == 5 and da.facets("category") == [("a", 5), ("b", 5)]


class Sparse(hs.Document):
    title: hs.Text
    description: hs.Text = ""
    tag: hs.Keyword = "x"
    embedding: Optional[hs.Vector[4]] = None


EMBEDDED = [s for s in ("memory", "hnsw", "sqlite") if s in STORAGES]


@pytest.mark.parametrize("storage", EMBEDDED)
@pytest.mark.parametrize("exact", [True, False])
def test_hybrid_sum_counts_documents_without_vectors(storage, exact, tmp_path):
    """exact=True: sum's candidates are the vector list and every lexical match; a match without a
    vector scores as the zero vector (ip 0), which can beat every vector in the list: no pruning
    bound may assume the list's last score caps the documents outside it. exact=False: the
    lexical top `candidates` instead of every match (third edition)."""
    opts = {"path": tmp_path / "c.db"} if storage == "sqlite" else {}
    da = hs.DocumentArray(Sparse, storage=storage, metric="ip", **opts)
    q = np.array([1.0, 0, 0, 0])
    # the vector documents rank first by BM25 (short titles) and fill the first lexical blocks;
    # the text-only ones rank lower by BM25 but higher fused (0 against -10 and below)
    away = [{"id": f"v{i}", "title": "red" + " cable" * (i // 8), "embedding": [-10.0 - i / 1000, 1, 0, 0]}
            for i in range(300)]
    plain = [{"id": f"n{i}", "title": "red" + " case" * (60 + i % 5)} for i in range(50)]
    da.extend(away + plain)
    docs = {d.id: d for d in da}
    bm = best_fields(docs, "red")
    vec = {i: (float(np.dot(d.embedding, q)) if d.embedding is not None else 0.0) for i, d in docs.items()}
    with_vec = [i for i, d in docs.items() if d.embedding is not None]
    vtop = sorted(with_vec, key=lambda i: -vec[i])[:20]
    ltop = sorted(bm, key=lambda i: -bm[i])[:20]
    # exact=True: every lexical match is a candidate (first edition); else the lexical top 20
    ref = {i: bm.get(i, 0.0) + vec[i] for i in set(vtop) | (set(bm) if exact else set(ltop))}
    res = da.find(text="red", vector=q, fusion="sum", candidates=20, limit=10, exact=exact)
    assert_topk(res, ref, 10)
    if exact:
        assert all(i.startswith("n") for i in res.ids)  # the text-only matches beat every vector
    da.close()


@pytest.mark.parametrize("storage", EMBEDDED)
def test_text_counts_when_no_live_document_matches(storage, tmp_path):
    """Two text fields whose dictionaries hold the query's words, and no live document holding
    them (deleted, or filtered out): counts are 0 and lists empty, never an error."""
    opts = {"path": tmp_path / "c.db"} if storage == "sqlite" else {}
    da = hs.DocumentArray(Sparse, storage=storage, **opts)
    da.extend([{"id": "1", "title": "red", "description": "blue"},
               {"id": "2", "title": "green", "description": "green"}])
    assert da.count(text="red blue") == 1
    assert da.count(text="red blue", filter={"id": "2"}) == 0
    assert da.facets("tag", text="red blue", filter={"id": "2"}) == []
    assert da.facets("tag", text="red blue") == [("x", 1)]
    del da["1"]
    assert da.count(text="red blue") == 0
    assert da.find(text="red blue", sort=[("id", "asc")], limit=None).ids == []
    assert da.find(text="red blue").ids == []
    da.close()
