"""API.md section 11 on the embedded storages: find(rerank=...) re-scores the retrieval ranking's
top hits, against a Python model (tests/models.py: rerank_model, rrf_rerank_scores,
linear_rerank_scores) over the same find without a reranker: top-N, order by the reranker's
score (ties in retrieval order), min_score and the page after reranking, part_scores kept; and
the errors of a reranker that fails or returns scores that cannot rank."""
import sys
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import EMBEDDED, storage_fixture
from tests.models import linear_rerank_scores, rerank_model, rrf_rerank_scores

storage = storage_fixture(EMBEDDED)

WORDS = ["red", "blue", "green", "lamp", "desk", "chair"]
NO_TEXT = {"hnswlib", "annlite"}  # no lexical engine (tests/contract/test_lexical.py)
Q = np.array([0.3, -0.2, 0.9, 0.1])


class Item(hs.Document):
    title: hs.Text = ""
    cat: hs.Keyword = ""
    v: hs.Vector[4]


def _docs(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [{"id": f"d{i}", "title": " ".join(rng.choice(WORDS, 3)), "cat": f"c{i % 3}",
             "v": rng.standard_normal(4) + 0.1} for i in range(n)]


def words_in_title(query: str, documents: list) -> list:
    """A deterministic reranker: how many query words the title holds (many ties)."""
    return [sum(w in doc.title.split() for w in query.split()) for doc in documents]


def permuted(query: str, documents: list) -> list:
    """A deterministic reranker that ignores the query: a fixed permutation of the ids."""
    return [float((int(doc.id[1:]) * 37) % 101) for doc in documents]


@pytest.fixture
def filled(make_da):
    def make(n=80, seed=0):
        da = make_da(Item)
        docs = _docs(n, seed)
        da.extend(docs)
        return da, docs
    return make


def _finds(storage) -> dict:
    """The retrieval finds to rerank, by the storage's abilities (a vector find everywhere)."""
    out = {"vector": {"vector": Q}, "vector+filter": {"vector": Q, "filter": {"cat": {"$in": ["c0", "c2"]}}}}
    if storage not in NO_TEXT:
        out.update({"text": {"text": "red lamp desk"},
                    "hybrid": {"text": "red lamp", "vector": Q},
                    "hybrid-rrf": {"text": "blue chair", "vector": Q, "fusion": "rrf"}})
    return out


def _check(res, retrieval, model_hits) -> None:
    """res against the model: ids, scores, and part_scores (each retrieval part moved with its
    hit, the reranker's score as "rerank")."""
    positions = [pos for pos, _ in model_hits]
    assert res.ids == [retrieval.ids[p] for p in positions]
    np.testing.assert_array_equal(res.scores, np.array([s for _, s in model_hits], dtype=np.float32))
    parts = res.part_scores
    before = retrieval.part_scores
    assert set(parts) == set(before) | {"rerank"}
    for name, values in before.items():
        np.testing.assert_array_equal(parts[name], values[positions])
    np.testing.assert_array_equal(parts["rerank"], res.scores)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(["vector", "vector+filter", "text", "hybrid", "hybrid-rrf"]),
       reranker=st.sampled_from([words_in_title, permuted]), limit=st.integers(0, 25), offset=st.integers(0, 30),
       top=st.one_of(st.none(), st.integers(1, 60)), min_score=st.one_of(st.none(), st.sampled_from([1, 2, 40.0])))
def test_callable_reranker_matches_the_model(filled, storage, case, reranker, limit, offset, top, min_score):
    da, _ = filled()
    finds = _finds(storage)
    kwargs = finds.get(case, finds["vector"])
    query = kwargs.get("text", "green desk")
    extra = {} if "text" in kwargs else {"rerank_query": query}
    n = max(limit + offset, 50) if top is None else top
    retrieval = da.find(limit=n, **kwargs)
    model = rerank_model(list(range(len(retrieval))), reranker(query, retrieval.docs), limit, offset, min_score)
    res = da.find(limit=limit, offset=offset, rerank=reranker, rerank_top=top, min_score=min_score, **kwargs,
                  **extra)
    _check(res, retrieval, model)
    assert res.total is None or res.total == da.count(text=kwargs["text"], filter=kwargs.get("filter"))


def test_pages_of_a_reranked_ranking_are_its_slices(filled, storage):
    da, _ = filled(120, seed=2)
    kwargs = _finds(storage).get("hybrid", {"vector": Q, "rerank_query": "red lamp"})
    whole = da.find(limit=40, rerank=words_in_title, rerank_top=40, **kwargs)
    assert len(whole) == 40
    for offset in (0, 1, 7, 33, 39, 40, 45):
        page = da.find(limit=6, offset=offset, rerank=words_in_title, rerank_top=40, **kwargs)
        assert page.ids == whole.ids[offset:offset + 6]
        np.testing.assert_array_equal(page.scores, whole.scores[offset:offset + 6])


def test_only_the_top_n_are_reranked(filled, storage):
    """rerank_top=N: the reranked ranking holds the retrieval's first N hits, whatever limit asks."""
    da, _ = filled()
    seen = []

    def spy(query, documents):
        seen.append([d.id for d in documents])
        return [-i for i in range(len(documents))]  # keeps the retrieval order

    retrieval = da.find(vector=Q, limit=7)
    res = da.find(vector=Q, limit=20, rerank=spy, rerank_top=7, rerank_query="q")
    assert seen == [retrieval.ids] and res.ids == retrieval.ids
    seen.clear()
    da.find(vector=Q, limit=3, offset=2, rerank=spy, rerank_query="q")  # default: max(limit + offset, 50)
    assert seen == [da.find(vector=Q, limit=50).ids]
    seen.clear()
    assert len(da.find(vector=Q, limit=0, rerank=spy, rerank_query="q")) == 0 and seen == []


@pytest.mark.parametrize("fused", ["rrf", "linear", "linear-weighted"])
def test_fusion_rerankers_match_the_model(filled, storage, fused):
    da, _ = filled(100, seed=5)
    kwargs = _finds(storage).get("hybrid-rrf" if fused == "rrf" else "hybrid", {"vector": Q})
    weights = {"vector": 0.8, "text": 0.2} if "text" in kwargs else {"vector": 1.0}
    reranker = {"rrf": hs.RRFReranker(k=10), "linear": hs.LinearReranker(),
                "linear-weighted": hs.LinearReranker(weights)}[fused]
    retrieval = da.find(limit=30, **kwargs)
    parts = {name: [float(x) for x in a] for name, a in retrieval.part_scores.items()}
    if fused == "rrf":
        scores = rrf_rerank_scores(parts, 10)
    else:
        scores = linear_rerank_scores(parts, weights if fused == "linear-weighted" else None)
    model = rerank_model(list(range(len(retrieval))), scores, 8, 3)
    res = da.find(limit=8, offset=3, rerank=reranker, rerank_top=30, **kwargs)
    # the model's float64 sums against the library's: the order and the rounding of the scores
    assert res.ids == [retrieval.ids[p] for p, _ in model]
    np.testing.assert_allclose(res.scores, [s for _, s in model], rtol=1e-6)
    np.testing.assert_allclose(res.part_scores["rerank"], res.scores)


def test_find_batched_reranks_each_row_as_find_does(filled, storage):
    da, _ = filled()
    rows = np.array([Q, -Q, [1.0, 0.0, 0.0, 0.0]])
    queries = ["red lamp", "desk", "blue green chair"]
    many = da.find_batched(rows, limit=5, offset=2, min_score=1, rerank=words_in_title, rerank_top=30,
                           rerank_query=queries)
    for row, query, res in zip(rows, queries, many):
        one = da.find(vector=row, limit=5, offset=2, min_score=1, rerank=words_in_title, rerank_top=30,
                      rerank_query=query)
        assert res.ids == one.ids
        np.testing.assert_array_equal(res.scores, one.scores)
        np.testing.assert_array_equal(res.part_scores["vector"], one.part_scores["vector"])
    fused = da.find_batched(rows, limit=4, rerank=hs.RRFReranker())
    assert [r.ids for r in fused] == [da.find(vector=row, limit=4).ids for row in rows]  # one list: same order


BAD_SCORES = {
    "too few": lambda q, docs: [1.0] * (len(docs) - 1),
    "too many": lambda q, docs: [1.0] * (len(docs) + 1),
    "nan": lambda q, docs: [float("nan")] + [1.0] * (len(docs) - 1),
    "inf": lambda q, docs: [float("inf")] * len(docs),
    "not a number": lambda q, docs: ["high"] * len(docs),
    "none": lambda q, docs: None,
    "a number": lambda q, docs: 3.0,
    "2-d": lambda q, docs: np.ones((len(docs), 2)),
    "raises": lambda q, docs: 1 / 0,
}


@pytest.mark.parametrize("case", list(BAD_SCORES))
def test_a_reranker_that_fails_raises_rerank_error_and_changes_nothing(filled, storage, case):
    da, docs = filled(30)
    before = da.find(vector=Q, limit=10)
    with pytest.raises(hs.RerankError):
        da.find(vector=Q, limit=5, rerank=BAD_SCORES[case], rerank_query="red")
    with pytest.raises(hs.RerankError):
        da.find_batched(np.array([Q]), limit=5, rerank=BAD_SCORES[case], rerank_query=["red"])
    assert len(da) == len(docs)
    after = da.find(vector=Q, limit=10)
    assert after.ids == before.ids and after.part_scores.keys() == {"vector"}
    good = da.find(vector=Q, limit=5, rerank=permuted, rerank_query="red")  # nothing kept from the failure
    assert good.ids == [h for h, _ in rerank_model(da.find(vector=Q, limit=50).ids,
                                                   permuted("", da.find(vector=Q, limit=50).docs), 5)]


def test_rerank_argument_mistakes_are_config_errors(filled, storage):
    da, _ = filled(20)
    mistakes = [
        dict(filter={"cat": "c0"}, rerank=permuted, rerank_query="q"),  # filter-only: no ranking
        dict(vector=Q, rerank="cross-encoder", rerank_query="q"),  # not a reranker
        dict(vector=Q, rerank=permuted),  # the reranker reads a query: none given
        dict(vector=Q, rerank=permuted, rerank_query=3),
        dict(vector=Q, rerank=permuted, rerank_query="q", rerank_top=0),
        dict(vector=Q, rerank=permuted, rerank_query="q", rerank_top=True),
        dict(vector=Q, rerank_top=10),  # rerank_top without a reranker
        dict(vector=Q, rerank_query="q"),
        dict(vector=Q, rerank=hs.RRFReranker(), rerank_query="q"),  # a fusion reads no query
        dict(vector=Q, rerank=hs.LinearReranker({"text": 1.0}), rerank_query=None),  # no text list here
    ]
    if storage not in NO_TEXT:
        mistakes.append(dict(text="red", sort=[("cat", "asc")], rerank=permuted))
    for kwargs in mistakes:
        with pytest.raises(hs.ConfigError):
            da.find(limit=5, **kwargs)
    for kwargs in (dict(rerank=permuted), dict(rerank=permuted, rerank_query=["a"]), dict(rerank_top=3)):
        with pytest.raises(hs.ConfigError):
            da.find_batched(np.array([Q, Q]), limit=5, **kwargs)
    with pytest.raises(hs.ConfigError):
        hs.RRFReranker(k=-1)
    with pytest.raises(hs.ConfigError):
        hs.LinearReranker([0.5, 0.5])


def test_cross_encoder_needs_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # an import of it fails
    with pytest.raises(hs.ConfigError, match=r"hybridsearch\[rerank\]"):
        hs.CrossEncoderReranker()


def test_cross_encoder_scores_query_and_text_pairs(filled, storage, monkeypatch):
    """The adapter over a stand-in sentence_transformers.CrossEncoder (no model download): one
    predict call of (query, the text fields joined) pairs, the model built once, lazily."""
    made, calls = [], []

    class FakeCrossEncoder:
        def __init__(self, name, **options):
            made.append((name, options))

        def predict(self, pairs, batch_size=32):
            calls.append(list(pairs))
            return np.array([len(set(q.split()) & set(t.split())) for q, t in pairs], dtype=np.float32)

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=FakeCrossEncoder))
    reranker = hs.CrossEncoderReranker("some/model", device="cpu")
    assert made == []  # nothing loaded until a find uses it
    da, _ = filled(40)
    retrieval = da.find(vector=Q, limit=50)
    res = da.find(vector=Q, limit=6, rerank=reranker, rerank_query="red lamp")
    res2 = da.find(vector=Q, limit=6, rerank=reranker, rerank_query="red lamp")
    assert made == [("some/model", {"device": "cpu"})]
    assert calls[0] == [("red lamp", d.title) for d in retrieval.docs]
    model = rerank_model(retrieval.ids, words_in_title("red lamp", retrieval.docs), 6)
    assert res.ids == res2.ids == [h for h, _ in model]
