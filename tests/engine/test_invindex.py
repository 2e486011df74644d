"""The native inverted index against a plain-Python BM25 model (Lucene's formula, exact lengths)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# internal: the native inverted index on its own (term ids, slots, bitsets, both search modes);
# tests/contract/test_lexical.py checks the same BM25 through find(text=...)
from hybridsearch._native import _kernels as K

K1, B = 1.2, 0.75


class Model:
    """BM25 written out plainly: docs = {slot: [term ids]}."""

    def __init__(self):
        self.docs = {}

    def scores(self, query):
        docs = {s: t for s, t in self.docs.items() if t}
        n_docs = len(docs)
        if not n_docs:
            return {}
        avgdl = sum(len(t) for t in docs.values()) / n_docs
        out = {}
        for s, terms in docs.items():
            total, hit = 0.0, False
            for q in query:  # a repeated query term counts once per occurrence
                tf = terms.count(q)
                if not tf:
                    continue
                hit = True
                df = sum(1 for t in docs.values() if q in t)
                idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
                total += idf * tf / (tf + K1 * (1 - B + B * len(terms) / avgdl))
            if hit:
                out[s] = total
        return out


def as_args(query):
    terms, counts = np.unique(np.array(query, dtype=np.int32), return_counts=True)
    return terms.astype(np.int32), counts.astype(np.float32)


def index_docs(ix, docs):
    slots = np.array(list(docs), dtype=np.int64)
    tids = np.array([t for s in docs for t in docs[s]], dtype=np.int32)
    offs = np.cumsum([0] + [len(docs[s]) for s in docs]).astype(np.int64)
    ix.add(slots, tids, offs)


def check(ix, model, query, k, bits=None, allowed=None):
    ref = model.scores(query)
    if allowed is not None:
        ref = {s: v for s, v in ref.items() if s in allowed}
    terms, weights = as_args(query)
    for exhaustive in (True, False):
        scores, slots = ix.search(terms, weights, k, K1, B, bits, exhaustive)
        got = [(int(s), float(v)) for s, v in zip(slots, scores) if s >= 0]
        assert len(got) == min(k, len(ref))
        for s, v in got:
            assert math.isclose(v, ref[s], rel_tol=1e-4, abs_tol=1e-6)
        if got:  # the top-k set, up to ties at the boundary
            kth = sorted(ref.values(), reverse=True)[len(got) - 1]
            assert all(v >= kth - 1e-5 * max(1, kth) for _, v in got)
            assert all(ref[s] <= got[-1][1] + 1e-5 * max(1, got[-1][1]) for s in ref if s not in dict(got))
        assert list(scores[: len(got)]) == sorted(scores[: len(got)], reverse=True)


corpus = st.dictionaries(st.integers(0, 120), st.lists(st.integers(0, 30), max_size=25), max_size=60)
queries = st.lists(st.integers(0, 33), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(corpus, queries, st.integers(1, 12))
def test_top_k_equals_exhaustive_and_the_model(docs, query, k):
    ix = K.InvertedIndex()
    index_docs(ix, docs)
    model = Model()
    model.docs = {s: t for s, t in docs.items()}
    assert ix.docs == sum(1 for t in docs.values() if t)
    check(ix, model, query, k)


@settings(max_examples=80, deadline=None)
@given(corpus, st.lists(st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 120),
                                  st.lists(st.integers(0, 30), max_size=20)), max_size=30),
       queries, st.integers(1, 8))
def test_updates_and_deletes_keep_statistics_exact(docs, ops, query, k):
    ix = K.InvertedIndex()
    index_docs(ix, docs)
    model = Model()
    model.docs = dict(docs)
    for op, slot, terms in ops:
        if op == "add":
            index_docs(ix, {slot: terms})
            model.docs[slot] = terms
        else:
            ix.remove(np.array([slot], dtype=np.int64))
            model.docs.pop(slot, None)
    live = {s: t for s, t in model.docs.items() if t}
    assert ix.docs == len(live) and ix.total_len == sum(len(t) for t in live.values())
    for term in set(query):
        assert ix.df(term) == sum(1 for t in live.values() if term in t)
    check(ix, model, query, k)


@settings(max_examples=80, deadline=None)
@given(corpus, queries, st.integers(1, 10), st.integers(0, 2**32))
def test_filter_bitset_is_a_pre_filter(docs, query, k, seed):
    ix = K.InvertedIndex()
    index_docs(ix, docs)
    model = Model()
    model.docs = dict(docs)
    rng = np.random.default_rng(seed)
    allowed = {s for s in range(121) if rng.random() < 0.3}
    bits = np.zeros(2, dtype=np.uint64)
    for s in allowed:
        bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)
    check(ix, model, query, k, bits, allowed)


def test_score_and_matches_agree_with_the_model():
    rng = np.random.default_rng(3)
    docs = {s: rng.integers(0, 50, rng.integers(0, 30)).tolist() for s in range(300)}
    ix = K.InvertedIndex()
    index_docs(ix, docs)
    model = Model()
    model.docs = docs
    query = [3, 7, 7, 44]
    ref = model.scores(query)
    terms, weights = as_args(query)
    slots = np.arange(300, dtype=np.int64)
    got = ix.score(terms, weights, slots)
    np.testing.assert_allclose(got, [ref.get(s, 0.0) for s in range(300)], rtol=1e-4, atol=1e-6)
    assert ix.matches(terms).tolist() == sorted(ref)


def test_zipfian_corpus_maxscore_matches_exhaustive():
    rng = np.random.default_rng(7)
    ix = K.InvertedIndex()
    vocab = 2000
    p = 1 / np.arange(1, vocab + 1)
    p /= p.sum()
    docs = {s: rng.choice(vocab, rng.integers(5, 60), p=p).tolist() for s in range(5000)}
    index_docs(ix, docs)
    for _ in range(50):
        q = rng.choice(vocab, rng.integers(1, 8), p=p)
        terms, weights = as_args(q.tolist())
        a = ix.search(terms, weights, 10, K1, B, None, True)
        b = ix.search(terms, weights, 10, K1, B, None, False)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5)
        # the same documents, except where scores tie at the k-th place
        kth = a[0][a[1] >= 0].min() if (a[1] >= 0).any() else 0.0
        above = lambda r: {int(i) for i, s in zip(r[1], r[0]) if i >= 0 and s > kth * (1 + 1e-5)}
        assert above(a) == above(b)


def test_bad_arguments_raise():
    ix = K.InvertedIndex()
    import pytest
    with pytest.raises(ValueError):
        ix.add(np.array([0], dtype=np.int64), np.array([1], dtype=np.int32), np.array([0], dtype=np.int64))
    with pytest.raises(ValueError):
        ix.add(np.array([0], dtype=np.int64), np.array([-1], dtype=np.int32), np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError):
        ix.search(np.array([1], dtype=np.int32), np.array([], dtype=np.float32), 5)


@settings(max_examples=150, deadline=None)
@given(corpus, corpus, queries, st.lists(st.integers(0, 33), max_size=4), st.integers(1, 12),
       st.one_of(st.none(), st.integers(0, 2**32)))
def test_best_fields_search_equals_the_max_over_field_models(docs_a, docs_b, query_a, query_b, k, seed):
    """search_best_fields (one native call over several fields) against the plain model:
    a document's score is the best of its fields' BM25; ties to the lower slot."""
    fields = []
    for docs in (docs_a, docs_b):
        ix = K.InvertedIndex()
        index_docs(ix, docs)
        model = Model()
        model.docs = dict(docs)
        fields.append((ix, model))
    allowed, bits = None, None
    if seed is not None:
        rng = np.random.default_rng(seed)
        allowed = {s for s in range(121) if rng.random() < 0.5}
        bits = np.zeros(2, dtype=np.uint64)
        for s in allowed:
            bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)
    best = {}
    for (ix, model), q in zip(fields, (query_a, query_b)):
        for s, v in model.scores(q).items():
            if allowed is None or s in allowed:
                best[s] = max(best.get(s, 0.0), v)
    args = [as_args(q) if q else (np.empty(0, np.int32), np.empty(0, np.float32)) for q in (query_a, query_b)]
    scores, slots = K.search_best_fields([ix for ix, _ in fields], [a[0] for a in args], [a[1] for a in args],
                                         k, K1, B, bits)
    got = [(int(s), float(v)) for s, v in zip(slots, scores) if s >= 0]
    assert len(got) == min(k, len(best))
    assert all(s == -1 for s in slots[len(got):])
    for s, v in got:
        assert math.isclose(v, best[s], rel_tol=1e-4, abs_tol=1e-6)
    if got:
        kth = got[-1][1]
        assert all(best[s] <= kth + 1e-5 * max(1, kth) for s in best if s not in dict(got))
    # best first, equal scores in slot order
    assert all(a[1] > b[1] or (a[1] == b[1] and a[0] < b[0]) for a, b in zip(got, got[1:]))


def test_best_fields_search_checks_its_arguments():
    ix = K.InvertedIndex()
    t, w = np.array([1], np.int32), np.array([1.0], np.float32)
    with pytest.raises(ValueError, match="one terms"):
        K.search_best_fields([ix], [t, t], [w], 3)
    with pytest.raises(ValueError, match="one weight per term"):
        K.search_best_fields([ix], [t], [np.ones(2, np.float32)], 3)
    with pytest.raises(TypeError):
        K.search_best_fields(["not an index"], [t], [w], 3)
    scores, slots = K.search_best_fields([], [], [], 4)
    assert slots.tolist() == [-1] * 4
