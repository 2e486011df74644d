"""The pieces a hybrid find is made of, against plain numpy: the candidate union, the top-k
selection of fusion, the slot bitset, every lexical match with its BM25 in one call, and the
vector scores of candidate rows read in place."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridsearch as hs
# internal: the units a hybrid find composes (tests/contract/test_lexical.py checks the finds)
from hybridsearch.document import schema_of
from hybridsearch.engine.columns import ColumnStore
from hybridsearch.engine.lexical import TextIndex, slot_bits
from hybridsearch.query.candidates import Candidates
from hybridsearch.query.executor import union
from hybridsearch.query.fusion import best

slots = st.lists(st.integers(0, 5000), max_size=300)


@settings(max_examples=300, deadline=None)
@given(slots, slots, st.booleans(), st.booleans())
def test_union_is_the_set_union_with_each_lists_positions(a, b, ascending, as_ids):
    """The executor's candidate union: every key once, a's first; each list's keys found at their
    positions, whether a comes ascending (every match), in rank order, or as str ids."""
    a = np.unique(np.array(a, dtype=np.int64))
    if not ascending:
        a = np.random.default_rng(len(a)).permutation(a)
    b = np.array(list(dict.fromkeys(b)), dtype=np.int64)
    if as_ids:
        a, b = np.array([f"d{x}" for x in a.tolist()], dtype=object), np.array([f"d{x}" for x in b.tolist()], dtype=object)

    def cands(keys):
        return Candidates(keys, np.zeros(len(keys), dtype=np.float32), np.arange(len(keys), dtype=np.int64))

    keys, order, docs, at_a, at_b = union(cands(a), cands(b))
    assert keys.tolist()[:len(a)] == a.tolist() and sorted(set(keys.tolist())) == sorted(set(a.tolist()) | set(b.tolist()))
    assert len(keys) == len(set(keys.tolist())) == len(order) and docs is None
    assert keys[at_a].tolist() == a.tolist() and keys[at_b].tolist() == b.tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=400), st.integers(1, 30))
def test_best_is_the_full_sort_cut_at_k(scores, k):
    """Partitioning first must give what sorting everything gives, ties to the smaller order."""
    s = np.array(scores, dtype=np.float64)
    inserted = np.random.default_rng(len(scores)).permutation(len(s)).astype(np.int64)
    want = sorted(range(len(s)), key=lambda i: (-s[i], inserted[i]))[:k]
    got, got_scores = best(s, k, inserted)
    assert got.tolist() == want
    assert got_scores.tolist() == s[want].astype(np.float32).tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3000), min_size=1, max_size=200))
def test_slot_bits_sets_exactly_the_slots(values):
    v = np.array(values, dtype=np.int64)
    bits = slot_bits(v)
    got = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little"))
    assert got.tolist() == sorted(set(values))


class Doc(hs.Document):
    title: hs.Text
    body: hs.Text


def test_scored_matches_equal_matches_and_their_scores(rng):
    words = ["red", "blue", "phone", "case", "cable", "usb", "green"]
    n = 400
    columns = {"title": [" ".join(rng.choice(words, rng.integers(1, 5))) for _ in range(n)],
               "body": [" ".join(rng.choice(words, rng.integers(0, 8))) for _ in range(n)]}
    index = TextIndex(schema_of(Doc))
    index.add(np.arange(n, dtype=np.int64), columns)
    bits = slot_bits(np.flatnonzero(rng.random(n) < 0.7))
    for text in ["red phone", "usb usb cable", '"blue phone"', "+red -case", "ca*", "nothing here"]:
        for b in (None, bits):
            got_slots, got_scores = index.scored_matches(text, b)
            want = index.matches(text, b)
            assert got_slots.tolist() == want.tolist(), text
            np.testing.assert_allclose(got_scores, index.scores(text, want), rtol=1e-5, err_msg=text)


def test_vector_scores_of_rows_read_in_place(rng):
    class V(hs.Document):
        v: hs.Vector[19]
    for metric in ("ip", "l2", "cosine"):
        da = hs.DocumentArray(V, metric=metric)
        X = rng.standard_normal((300, 19)).astype(np.float32)
        da.extend_columns({"id": [str(i) for i in range(300)], "v": X})
        q = rng.standard_normal(19).astype(np.float32)
        rows = rng.integers(0, 300, 50)  # repeats and any order
        res = da.find(vector=q, limit=300)
        by_id = dict(zip(res.ids, res.scores))
        want = [by_id[str(r)] for r in rows]
        store = da._storage.store  # internal: the column store under the memory storage
        assert isinstance(store, ColumnStore)
        np.testing.assert_allclose(store.vector_scores(q, rows), want, rtol=1e-4, atol=1e-4)


def test_row_scores_refuse_a_row_outside_the_block():
    from hybridsearch._native import _kernels as K  # internal: the wrapper's own bounds check
    X = np.zeros((2, 4), dtype=np.float32)
    q = np.ones(4, dtype=np.float32)
    for bad in ([1 << 40], [-1], [0, 2]):
        with pytest.raises(IndexError):
            K.scores_rows_at(X, np.array(bad, dtype=np.int64), q, "ip")
    assert K.scores_rows_at(X, np.array([1, 0, 1], dtype=np.int64), q, "l2").tolist() == [4.0, 4.0, 4.0]
