"""Hybrid search, third edition (API.md sections 4 and 8), on the remote storages answered through
query/executor.py, against a plain-Python model: "sum" and "linear" fuse the lexical
top-`candidates` and the vector top-`candidates`, each candidate scored on both parts (a vector
candidate holding a query term keeps its real BM25); exact=True takes every lexical match;
res.part_scores holds each hit's raw parts. Qdrant runs embedded; Elasticsearch, OpenSearch and
Weaviate on nodes started by tests/engines.py (skipped without one); Vespa against recorded
answers (its requests are those of tests/storages/remote/test_vespa.py)."""
import math

import numpy as np
import pytest

from tests.contract.test_lexical import WORDS, cosine, hybrid_reference, random_docs, schema_and_tokens
from tests.storages.remote.test_vespa import _fields, _hit, _search_response, open_da, server  # noqa: F401

REMOTE = ["qdrant", "elasticsearch", "opensearch", "weaviate"]  # qdrant-client: local mode, not BM25
EF = 512  # beyond every collection here: the engines' vector lists are the exact ones


def third_edition(docs, text, q, fusion, candidates, tokens, exact=False, allowed=None, weights=(0.5, 0.5)):
    """(fused, text part, vector part), id -> score: the shared suite's model of API.md's hybrid find."""
    return hybrid_reference(docs, text, q, fusion, candidates, tokens=tokens, exact=exact, allowed=allowed,
                            weights=weights)


def linear(t: dict, v: dict, weights) -> dict:
    """API.md section 8's min-max normalised, weighted sum over the candidates."""
    def norm(raw):
        lo, hi = min(raw.values()), max(raw.values())
        return {i: (1.0 if x != 0 else 0.0) if hi == lo else (x - lo) / (hi - lo) for i, x in raw.items()}
    tn, vn = norm(t), norm(v)
    return {i: weights[0] * tn[i] + weights[1] * vn[i] for i in t}


def close(a, b, rel=1e-4) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-5)


def assert_ranked(res, ref, limit, offset=0, rel=1e-4):
    """The hits are the model's ranking [offset, offset + limit) (ties either way), each with the
    model's fused score and raw parts."""
    fused, text, vector = ref
    want = sorted(fused.values(), reverse=True)[offset:offset + limit]
    assert len(res) == len(want), (res.ids, want)
    assert all(close(g, w, rel) for g, w in zip(res.scores.tolist(), want)), (res.ids, res.scores, want)
    parts = res.part_scores
    assert set(parts) == {"text", "vector"}
    for n, i in enumerate(res.ids):
        assert close(float(res.scores[n]), fused[i], rel), (i, res.scores[n], fused[i])
        assert close(float(parts["text"][n]), text[i], rel), ("text", i, parts["text"][n], text[i])
        assert close(float(parts["vector"][n]), vector[i], rel), ("vector", i, parts["vector"][n], vector[i])


@pytest.fixture(params=REMOTE)
def storage(request):
    return request.param


def unit(angle):
    return [math.cos(angle), math.sin(angle)] + [0.0] * 6


def test_a_vector_candidate_holding_a_query_term_has_its_real_bm25(make_da, storage):
    """"v" is the vector top-1 and holds "red" in a long title, so it is not in the lexical top 2:
    its text part is still its BM25 (not 0), in its fused score and in part_scores; "d", a match
    in neither list, is a candidate only with exact=True."""
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    da.extend([{"id": "a", "title": "red red red", "embedding": unit(3.0)},
               {"id": "b", "title": "red red", "embedding": unit(2.9)},
               {"id": "v", "title": "red phone case cable charger glass", "embedding": unit(0.0)},
               {"id": "d", "title": "red leather wallet cover", "embedding": unit(1.4)},
               {"id": "c", "title": "blue", "embedding": unit(0.2)},
               {"id": "f", "title": "green", "embedding": unit(2.0)}])
    docs = {d.id: d for d in da}
    q = np.array(unit(0.0))
    for fusion in ("sum", "linear"):
        for exact in (False, True):
            ref = third_edition(docs, "red", q, fusion, 2, tokens, exact)
            assert ("d" in ref[0]) == exact and ref[1]["v"] > 0  # what the data is built for
            res = da.find(text="red", vector=q, fusion=fusion, candidates=2, limit=6, exact=exact, ef=EF)
            assert_ranked(res, ref, 6)
            assert ("d" in res.ids) == exact


@pytest.mark.parametrize("fusion", ["sum", "linear", "rrf"])
def test_hybrid_pages_and_parts_match_the_model(make_da, storage, fusion):
    rng = np.random.default_rng(29)
    schema, tokens = schema_and_tokens(storage)
    da = make_da(schema)
    da.extend(random_docs(rng, 80))
    docs = {d.id: d for d in da}
    cheap = {i for i, d in docs.items() if d.price < 80}
    weights = (0.3, 0.7) if fusion == "linear" else (0.5, 0.5)
    for n in range(4):
        text = " ".join(rng.choice(WORDS, rng.integers(1, 4)))
        q = rng.standard_normal(8)
        c = (3, 12)[n % 2]
        opts = dict(text=text, vector=q, fusion=fusion, candidates=c, ef=EF)
        if fusion == "linear":
            opts["weights"] = {"text": 0.3, "vector": 0.7}
        for exact in (False, True):
            for flt, allowed in ((None, None), ({"price": {"$lt": 80}}, cheap)):
                ref = third_edition(docs, text, q, fusion, c, tokens, exact, allowed, weights)
                full = da.find(limit=20, filter=flt, exact=exact, **opts)
                assert_ranked(full, ref, 20)
                page = da.find(limit=5, offset=3, filter=flt, exact=exact, **opts)
                assert_ranked(page, ref, 5, 3)


# ------------------------------------------------------------------ Vespa, recorded answers
def _answer(rows):
    """The hybrid profile's answer to the linear-fusion query: every text match and the vector
    candidates, each with its text_score match feature."""
    return _search_response([_hit(i, 9.0, dict(_fields(i, seq, v), matchfeatures={"text_score": t}))
                             for i, seq, v, t in rows])


def test_vespa_linear_and_exact_sum_take_the_editions_candidates_from_one_answer(server):  # noqa: F811
    """One answer holds every text match (b, c, e) and the vector hits; with candidates=2 the third
    edition keeps the lexical top 2 (b, c) and the 2 nearest (a, c), exact=True every match too:
    e's vector score 0 then lowers the vector part's minimum, which moves every normalised score."""
    rows = [("a", 1, [1, 0, 0, 0], 0.0), ("b", 2, [1, 1, 1, 0], 4.0), ("c", 3, [1, 1, 0, 0], 2.0),
            ("e", 4, [0, 0, 0, 1], 1.0), ("d", 5, [0, 0, 1, 0], 0.0)]
    q = np.array([1.0, 0, 0, 0])
    text = {i: t for i, _, _, t in rows}
    vec = {i: cosine(v, q) for i, _, v, _ in rows}
    da = open_da(server)
    for exact, cand in ((False, ["a", "b", "c"]), (True, ["a", "b", "c", "e"])):
        t, v = {i: text[i] for i in cand}, {i: vec[i] for i in cand}
        for fusion in ("linear", "sum"):
            if fusion == "sum" and not exact:
                continue  # Vespa's own weakAnd ∪ nearestNeighbor query: tests/storages/remote/test_vespa.py
            server.queue((200, _answer(rows)))
            kw = {"weights": {"text": 0.3, "vector": 0.7}} if fusion == "linear" else {}
            res = da.find(text="usb", vector=q, fusion=fusion, candidates=2, limit=4, exact=exact, **kw)
            body = server.requests[-1][2]
            assert body["hits"] == 10000 and body["ranking"] == "hybrid"
            assert 'title contains "usb" or description contains "usb"' in body["yql"]
            fused = linear(t, v, (0.3, 0.7)) if fusion == "linear" else {i: t[i] + v[i] for i in cand}
            assert_ranked(res, (fused, t, v), 4, rel=1e-5)
