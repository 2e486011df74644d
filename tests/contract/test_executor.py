"""Hybrid search, third edition (API.md sections 4 and 8), and res.part_scores, on every storage
with text search, against tests/contract/test_lexical.py's hybrid_reference.

"sum" and "linear" fuse the lexical top-`candidates` and the vector top-`candidates`, each
candidate scored on both parts; exact=True keeps the first edition (every lexical match).
Pages (offset) and min_score cut the ranking and its part scores alike."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from tests.conftest import STORAGES
from tests.contract.test_lexical import (TEXT_STORAGES, WORDS, cosine, hybrid_reference, random_docs,
                                         schema_and_tokens)

FIXTURES = [HealthCheck.function_scoped_fixture]
EMBEDDED = ("memory", "memory-path", "hnsw", "hnsw-path", "sqlite")
VECTOR_ONLY = ("hnswlib", "annlite")  # storages without a lexical engine
EF = 512  # beyond every collection here: hnsw's graph list is then the exact one


def close(a, b) -> bool:
    """Equal up to float32 rounding; NaN equals NaN (a part not scored)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)


def assert_page(res, ref: tuple, limit: int, offset: int = 0) -> None:
    """res is the page [offset, offset + limit) of the model's ranking: its scores are the model's
    sorted scores there (so ties may come in either order), each hit's score and part scores are
    the model's for that hit."""
    fused, text, vector = ref
    ranked = sorted(fused.values(), reverse=True)[offset:offset + limit]
    assert len(res) == len(ranked), (res.ids, ranked)
    for got, want in zip(res.scores.tolist(), ranked):
        assert close(got, want), (res.ids, res.scores, ranked)
    for i, s in zip(res.ids, res.scores.tolist()):
        assert close(s, fused[i]), (i, s, fused[i])
    parts = res.part_scores
    assert set(parts) == {"text", "vector"}
    for name, model in (("text", text), ("vector", vector)):
        got = parts[name]
        assert got.dtype == np.float32 and got.shape == (len(res),)
        for i, x in zip(res.ids, got.tolist()):
            assert close(x, model[i]), (name, i, x, model[i])


@pytest.mark.parametrize("storage", TEXT_STORAGES)
@pytest.mark.parametrize("fusion", ["sum", "linear", "rrf"])
@pytest.mark.parametrize("exact", [False, True])
def test_hybrid_pages_match_the_third_edition_model(make_da, storage, fusion, exact):
    rng = np.random.default_rng(29)
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    da.extend(random_docs(rng, 150))
    docs = {d.id: d for d in da}
    cheap = {i for i, d in docs.items() if d.price < 80}
    for n in range(6):
        text = " ".join(rng.choice(WORDS, rng.integers(1, 4)))
        q = rng.standard_normal(8)
        candidates = (3, 12, 40)[n % 3]
        weights = (0.3, 0.7) if fusion == "linear" else (0.5, 0.5)
        opts = dict(text=text, vector=q, fusion=fusion, candidates=candidates, exact=exact, ef=EF)
        if fusion == "linear":
            opts["weights"] = {"text": 0.3, "vector": 0.7}
        for flt, allowed in ((None, None), ({"price": {"$lt": 80}}, cheap)):
            ref = hybrid_reference(docs, text, q, fusion, candidates, tokens=tokens, exact=exact, allowed=allowed,
                                   weights=weights)
            full = da.find(limit=25, filter=flt, **opts)
            assert_page(full, ref, 25)
            assert full.total is None
            page = da.find(limit=6, offset=4, filter=flt, **opts)
            assert_page(page, ref, 6, 4)
            assert page.ids == full.ids[4:10]
            if len(full) > 3:  # min_score keeps a prefix, its part scores with it
                cut = float(full.scores[len(full) // 2])
                kept = da.find(limit=25, filter=flt, min_score=cut, **opts)
                n_kept = int(np.count_nonzero(full.scores >= cut))
                assert kept.ids == full.ids[:n_kept]
                for name, part in kept.part_scores.items():
                    np.testing.assert_array_equal(part, full.part_scores[name][:n_kept])


@pytest.mark.parametrize("storage", TEXT_STORAGES)
def test_a_match_outside_both_top_lists_is_a_candidate_only_with_exact(make_da, storage):
    """Third edition: "d" holds a query term but is neither in the lexical top 2 (longer title) nor
    in the vector top 2; it is a candidate, and the best hit, only with exact=True (every lexical
    match, the first edition)."""
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)

    def unit(angle):
        return [math.cos(angle), math.sin(angle)] + [0.0] * 6

    da.extend([{"id": "a", "title": "red red red", "embedding": unit(3.0)},
               {"id": "b", "title": "red red", "embedding": unit(2.9)},
               {"id": "c", "title": "blue", "embedding": unit(0.0)},
               {"id": "e", "title": "green", "embedding": unit(0.3)},
               {"id": "d", "title": "red phone case cable charger", "embedding": unit(0.6)},
               {"id": "f", "title": "glass", "embedding": unit(1.5)}])
    docs = {d.id: d for d in da}
    q = np.array(unit(0.0))
    for fusion in ("sum", "linear"):
        first = hybrid_reference(docs, "red", q, fusion, 2, tokens=tokens, exact=True)
        third = hybrid_reference(docs, "red", q, fusion, 2, tokens=tokens, exact=False)
        assert max(first[0], key=first[0].get) == "d" and "d" not in third[0]  # what the data is built for
        for exact, ref in ((False, third), (True, first)):
            res = da.find(text="red", vector=q, fusion=fusion, candidates=2, limit=4, exact=exact, ef=EF)
            assert_page(res, ref, 4)
            assert ("d" in res.ids) == exact


@pytest.mark.parametrize("storage", TEXT_STORAGES)
def test_part_scores_of_an_rrf_hit_are_nan_on_the_list_it_is_not_on(make_da, storage):
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    da.extend([{"id": "t", "title": "red phone", "embedding": [-1.0] + [0.0] * 7},
               {"id": "v", "title": "glass", "embedding": [1.0] + [0.0] * 7},
               {"id": "both", "title": "red", "embedding": [0.5, 0.5] + [0.0] * 6}])
    docs = {d.id: d for d in da}
    q = np.array([1.0] + [0.0] * 7)
    res = da.find(text="red", vector=q, fusion="rrf", candidates=2, limit=3, ef=EF)
    ref = hybrid_reference(docs, "red", q, "rrf", 2, tokens=tokens)
    assert_page(res, ref, 3)
    parts = dict(zip(res.ids, zip(res.part_scores["text"].tolist(), res.part_scores["vector"].tolist())))
    assert math.isnan(parts["v"][0]) and not math.isnan(parts["v"][1])
    assert math.isnan(parts["t"][1]) and not math.isnan(parts["t"][0])


@pytest.mark.parametrize("storage", TEXT_STORAGES + [s for s in VECTOR_ONLY if s in STORAGES])
def test_part_scores_of_one_list_finds_are_their_scores(make_da, storage):
    """A text find: {"text": its scores}; a vector find: {"vector": ...}; filter only: {}; all
    cut by offset and min_score as the hits are."""
    da = make_da(schema_and_tokens(storage)[0])
    da.extend(random_docs(np.random.default_rng(3), 60))
    q = np.random.default_rng(4).standard_normal(8)
    vec = da.find(vector=q, limit=10, offset=2, min_score=-0.5)
    assert list(vec.part_scores) == ["vector"]
    np.testing.assert_array_equal(vec.part_scores["vector"], vec.scores)
    docs = {d.id: d for d in da}
    assert all(close(float(s), cosine(docs[i].embedding, q)) for i, s in zip(vec.ids, vec.part_scores["vector"]))
    assert da.find(filter={"category": "a"}, limit=5, offset=1).part_scores == {}
    assert da.find(vector=q, limit=0).part_scores["vector"].shape == (0,)
    if storage in VECTOR_ONLY:  # no lexical engine: the text find is refused, saying why
        with pytest.raises(hs.UnsupportedError, match="lexical"):
            da.find(text="red phone", limit=10)
        return
    txt = da.find(text="red phone", limit=10, offset=3, min_score=0.1)
    assert list(txt.part_scores) == ["text"]
    np.testing.assert_array_equal(txt.part_scores["text"], txt.scores)


# ------------------------------------------------- a property test over random collections
@st.composite
def hybrid_cases(draw):
    return dict(seed=draw(st.integers(0, 2**32 - 1)), n=draw(st.integers(3, 70)),
                words=draw(st.integers(1, 4)), candidates=draw(st.integers(1, 30)),
                fusion=draw(st.sampled_from(["sum", "linear", "rrf"])), w=draw(st.floats(0.0, 1.0)),
                limit=draw(st.integers(1, 15)), offset=draw(st.integers(0, 10)),
                flt=draw(st.sampled_from([None, {"category": "a"}, {"price": {"$gte": 20}}])))


def _matches(doc, flt) -> bool:
    if flt is None:
        return True
    if "category" in flt:
        return doc.category == flt["category"]
    return doc.price >= flt["price"]["$gte"]


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES)
@given(case=hybrid_cases())
@pytest.mark.parametrize("storage,exact", [("memory", False), ("memory", True), ("hnsw", True), ("hnsw", False)])
def test_random_hybrid_finds_match_the_model(make_da, storage, exact, case):
    rng = np.random.default_rng(case["seed"])
    da = make_da(schema_and_tokens(storage)[0])
    da.extend(random_docs(rng, case["n"]))
    docs = {d.id: d for d in da}
    text = " ".join(rng.choice(WORDS, case["words"]))
    q = rng.standard_normal(8)
    w = case["w"]
    weights = (w, 1 - w) if w < 1 else (1.0, 0.0)
    opts = dict(text=text, vector=q, fusion=case["fusion"], candidates=case["candidates"], exact=exact, ef=EF,
                limit=case["limit"], offset=case["offset"], filter=case["flt"])
    if case["fusion"] == "linear":
        opts["weights"] = {"text": weights[0], "vector": weights[1]}
    allowed = {i for i, d in docs.items() if _matches(d, case["flt"])}
    ref = hybrid_reference(docs, text, q, case["fusion"], case["candidates"], exact=exact, allowed=allowed,
                           weights=weights)
    res = da.find(**opts)
    assert_page(res, ref, case["limit"], case["offset"])
    assert all(_matches(docs[i], case["flt"]) for i in res.ids)
