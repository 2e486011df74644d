"""find_batched with text queries (API.md section 12, issue 31 item 4): `texts=` makes each row a
text find (hybrid with `vectors`), `vectors="auto"` embeds the texts with one model call per
batch. The reference is find() called once per query: each row must equal it (ids, scores,
part scores). Public API only; the fake functions are those of test_embeddings."""

import numpy as np
import pytest

import hybridsearch as hs
from tests.conftest import storage_fixture
from tests.contract.test_embeddings import DIM, Fake, fn_schema, reference, texts_of

storage = storage_fixture(("memory", "memory-path", "hnsw", "hnsw-path", "sqlite"))

QUERIES = ["red lamp", "usb cable charger", "blue desk item", "phone case", "green", "lamp desk usb",
           "item 3", "charger phone red", "cable", "nothing matches zzz", "desk", "blue blue green"]


def same(got, want):
    assert got.ids == want.ids
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6, atol=1e-7)
    assert set(got.part_scores) == set(want.part_scores)
    for k in want.part_scores:
        np.testing.assert_allclose(got.part_scores[k], want.part_scores[k], rtol=1e-6, atol=1e-7)


def filled(make_da, fn, schema=None, n=40):
    da = make_da(schema or fn_schema(fn))
    da.extend([{**d, "tag": "ab"[i % 2]} for i, d in enumerate(texts_of(n))])
    fn.calls.clear()
    return da


@pytest.mark.parametrize("options", [{}, {"limit": 3, "offset": 2}, {"filter": {"tag": "a"}, "limit": 5},
                                     {"min_score": 0.2, "exact": True}])
def test_auto_rows_equal_find_auto_with_one_call_per_batch(make_da, options):
    fn = Fake(batch_size=5)
    da = filled(make_da, fn)
    got = da.find_batched(vectors="auto", texts=QUERIES, **options)
    assert fn.calls == [QUERIES[0:5], QUERIES[5:10], QUERIES[10:12]]  # one model call per batch of 5
    assert len(got) == len(QUERIES)
    for q, res in zip(QUERIES, got):
        same(res, da.find(text=q, vector="auto", **options))
    assert len(fn.calls) == 3 + len(QUERIES)  # and find embeds one query per call


def test_auto_without_text_fields_is_vector_rows(make_da):
    fn = Fake(batch_size=4)

    class Only(hs.Document):
        title: hs.Keyword = ""
        emb: hs.Vector[DIM] = hs.embedded("title", fn=fn)
    da = make_da(Only)
    da.extend([{"id": d["id"], "title": d["title"]} for d in texts_of(30)])
    fn.calls.clear()
    got = da.find_batched("auto", texts=QUERIES[:6], limit=4, exact=True)
    assert [len(c) for c in fn.calls] == [4, 2]
    for q, res in zip(QUERIES, got):
        want = da.find(text=q, vector="auto", limit=4, exact=True)
        same(res, want)
        assert set(res.part_scores) == {"emb"}  # no text part: the embedded vector alone
        # and the brute-force answer: cosine to the stored vectors of every document
        scores = {d.id: float(np.dot(reference(q, DIM, fn.model), np.asarray(d.emb))) for d in da}
        best = sorted(scores.values(), reverse=True)[:4]
        np.testing.assert_allclose(res.scores, best, rtol=1e-5, atol=1e-6)


class QueryPrefixed(Fake):
    """Embeds queries differently from documents and has no embed_queries of its own."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.queries = []

    def embed_query(self, text):
        self.queries.append(text)
        return reference("query " + text, self.dimension, self.model)


def test_function_with_its_own_embed_query_is_asked_per_text(make_da):
    fn = QueryPrefixed(batch_size=8)
    da = filled(make_da, fn, n=20)
    got = da.find_batched(vectors="auto", texts=QUERIES[:5], limit=6)
    assert fn.calls == [] and fn.queries == QUERIES[:5]  # its own query embedding, never embed_documents
    for q, res in zip(QUERIES, got):
        same(res, da.find(text=q, vector="auto", limit=6))


def test_texts_alone_and_texts_with_vectors(make_da):
    fn = Fake()
    da = filled(make_da, fn, n=30)
    for q, res in zip(QUERIES, da.find_batched(texts=QUERIES, limit=5)):
        same(res, da.find(text=q, limit=5))
    Q = np.stack([reference(q, DIM, "elsewhere") for q in QUERIES[:4]])
    for q, v, res in zip(QUERIES, Q, da.find_batched(Q, texts=QUERIES[:4], limit=5, offset=1)):
        same(res, da.find(v, text=q, limit=5, offset=1))
    for q, v, res in zip(QUERIES, Q, da.find_batched({"emb": Q}, texts=QUERIES[:4], limit=5)):
        same(res, da.find({"emb": v}, text=q, limit=5))
    assert fn.calls == []  # nothing embedded without "auto"
    assert da.find_batched("auto", texts=[]) == []


def test_rerank_rows_read_their_own_query(make_da):
    fn = Fake(batch_size=3)
    da = filled(make_da, fn, n=25)

    def by_length(query, docs):
        return [-abs(len(d.title) - len(query)) for d in docs]
    got = da.find_batched("auto", texts=QUERIES[:4], limit=3, rerank=by_length, rerank_top=10)
    for q, res in zip(QUERIES, got):
        same(res, da.find(text=q, vector="auto", limit=3, rerank=by_length, rerank_top=10))
    other = ["x" * 3, "y" * 9, "z", "w" * 6]
    got = da.find_batched("auto", texts=QUERIES[:4], limit=3, rerank=by_length, rerank_query=other)
    for q, r, res in zip(QUERIES, other, got):
        same(res, da.find(text=q, vector="auto", limit=3, rerank=by_length, rerank_query=r))


def test_refusals_write_and_embed_nothing(make_da):
    fn = Fake(batch_size=2)
    da = filled(make_da, fn, n=6)
    fn.fail_on = len(fn.calls) + 2  # the second query batch fails
    with pytest.raises(hs.EmbeddingError, match="model server went away"):
        da.find_batched("auto", texts=QUERIES[:4])
    fn.fail_on = None
    with pytest.raises(hs.ConfigError, match="texts"):
        da.find_batched("auto")
    with pytest.raises(hs.ConfigError, match="list of query texts"):
        da.find_batched("auto", texts="red lamp")
    with pytest.raises(hs.ConfigError, match="not a string"):
        da.find_batched("auto", texts=["red", 3])
    with pytest.raises(hs.ConfigError, match="2 texts but 3 query vectors"):
        da.find_batched(np.stack([reference(q) for q in QUERIES[:3]]), texts=QUERIES[:2])
    with pytest.raises(hs.ConfigError, match="one per row"):
        da.find_batched("auto", texts=QUERIES[:2], rerank=lambda q, d: [0] * len(d), rerank_query=["x"])
    with pytest.raises(hs.ConfigError, match="vectors="):
        da.find_batched()
    fn.bad, fn.kind_of_bad = (len(fn.calls) + 1,), "shape"
    with pytest.raises(hs.EmbeddingError, match="shape"):
        da.find_batched("auto", texts=QUERIES[:2])

    class Plain(hs.Document):
        title: hs.Text = ""
        v: hs.Vector[DIM]
    plain = make_da(Plain)
    with pytest.raises(hs.ConfigError, match="hs.embedded"):
        plain.find_batched("auto", texts=["x"])
    assert len(da) == 6 and len(plain) == 0
