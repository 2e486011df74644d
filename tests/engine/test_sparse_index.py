"""The sparse-vector index (engine/sparse.py over kernels/hs_sparse.c) against a plain-Python
dict model of the dot product, its snapshot reader against damaged input, and check_sparse's
rules (API.md section 10)."""
import random
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# internal: the sparse index is an engine piece with no public API of its own yet (the schema
# and storages wire it in later), so it is tested through hybridsearch.engine.sparse
from hybridsearch.engine.sparse import MAX_ENTRIES, SparseIndex, check_sparse
from hybridsearch.errors import BackendError, SchemaError

# Weights are multiples of 1/8 up to 8 and documents and queries have few entries, so every
# product and every sum is exact in float32 and float64 alike: the model's scores equal the
# index's bit for bit and its ties are real ties.
WEIGHTS = st.integers(1, 64).map(lambda i: i / 8)
# a small vocabulary (many shared keys) plus the extremes of the key range
KEYS = st.one_of(st.integers(0, 40), st.sampled_from([1000, 2**20, 2**31 - 1]))
# slots across three search windows (4096 slots each) and far apart
SLOTS = st.one_of(st.integers(0, 300), st.integers(0, 9000))
DOCS = st.dictionaries(KEYS, WEIGHTS, max_size=12)
QUERIES = st.dictionaries(KEYS, WEIGHTS, max_size=8)


class Model:
    """docs = {slot: {key: weight}}: the dot product and its top-k written out plainly."""

    def __init__(self):
        self.docs = {}

    def add(self, batch):
        for slot, doc in batch:  # in order: a slot given twice keeps its last document
            if doc:
                self.docs[slot] = dict(doc)
            else:
                self.docs.pop(slot, None)

    def remove(self, slots):
        for s in slots:
            self.docs.pop(s, None)

    def score(self, slot, query):
        doc = self.docs.get(slot, {})
        return sum(w * doc[k] for k, w in query.items() if k in doc)

    def top_k(self, query, k, allowed=None):
        hits = [(-self.score(s, query), s) for s, d in self.docs.items()
                if any(key in d for key in query) and (allowed is None or allowed(s))]
        hits.sort()  # best score first, ties to the lower slot
        return [-sc for sc, _ in hits[:k]], [s for _, s in hits[:k]]


def csr(batch):
    """[(slot, {key: weight})] -> the CSR arrays SparseIndex.add takes."""
    slots = np.array([s for s, _ in batch], dtype=np.int64)
    parts = [check_sparse(d) for _, d in batch]
    indptr = np.zeros(len(batch) + 1, dtype=np.int64)
    np.cumsum([len(i) for i, _ in parts], out=indptr[1:])
    indices = np.concatenate([i for i, _ in parts]) if parts else np.empty(0, np.int32)
    values = np.concatenate([v for _, v in parts]) if parts else np.empty(0, np.float32)
    return slots, indptr, indices, values


def bitset(allowed, nwords):
    bits = np.zeros(nwords, dtype=np.uint64)
    for s in allowed:
        if s < 64 * nwords:
            bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)
    return bits


def assert_same(index, model, query, k, bits=None, allowed=None):
    qi, qv = check_sparse(query)
    scores, slots = index.top_k(qi, qv, k, bits)
    want_scores, want_slots = model.top_k(query, k, allowed)
    assert slots.tolist() == want_slots
    assert scores.tolist() == want_scores
    assert scores.dtype == np.float32 and slots.dtype == np.int64


def assert_holds(index, model):
    """The index's documents are the model's, read back through to_arrays and get."""
    a = index.to_arrays()
    got = {}
    for i, s in enumerate(a["slots"].tolist()):
        lo, hi = a["indptr"][i], a["indptr"][i + 1]
        got[s] = dict(zip(a["indices"][lo:hi].tolist(), a["values"][lo:hi].tolist()))
    assert got == model.docs
    assert len(index) == len(model.docs)
    assert index.stats()["postings"] == sum(map(len, model.docs.values()))
    for s in list(model.docs)[:5]:
        keys, vals = index.get(s)
        assert dict(zip(keys.tolist(), vals.tolist())) == model.docs[s]


OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.tuples(SLOTS, DOCS), max_size=8)),
    st.tuples(st.just("remove"), st.lists(SLOTS, max_size=5)),
    st.tuples(st.just("query"), QUERIES, st.integers(0, 12),
              st.one_of(st.none(), st.tuples(st.sets(SLOTS, max_size=60), st.integers(0, 150)))),
), min_size=1, max_size=25)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_writes_and_queries_match_the_model(ops):
    """Adds, overwrites (also of one slot twice in a batch), removes and queries with and
    without a filter bitset (also shorter than the slots, or empty), k = 0 and k beyond the
    matches: every top_k and every score equals the model's; the documents read back equal."""
    index, model = SparseIndex(), Model()
    for op in ops:
        if op[0] == "add":
            index.add(*csr(op[1]))
            model.add(op[1])
        elif op[0] == "remove":
            index.remove(np.array(op[1], dtype=np.int64))
            model.remove(op[1])
        else:
            _, query, k, filt = op
            if filt is None:
                assert_same(index, model, query, k)
            else:
                allowed, nwords = filt
                bits = bitset(allowed, nwords)
                assert_same(index, model, query, k, bits, lambda s: s < 64 * nwords and s in allowed)
            qi, qv = check_sparse(query)
            probe = sorted(set(list(model.docs)[:10]) | {0, 1, 9000, 10**6, -1})
            want = [model.score(s, query) if s >= 0 else 0.0 for s in probe]
            assert index.scores_of(np.array(probe), qi, qv).tolist() == want
            hits = sorted(s for s, d in model.docs.items() if any(key in d for key in query))
            assert index.matches(qi).tolist() == hits
            assert index.count(qi) == len(hits)
    assert_holds(index, model)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(SLOTS, DOCS), max_size=30), st.lists(QUERIES, min_size=1, max_size=6),
       st.integers(1, 10), st.lists(st.tuples(SLOTS, DOCS), max_size=8))
def test_snapshot_round_trip_and_reopen(batch, queries, k, later):
    """from_bytes(to_bytes()) holds the same documents and answers every query alike; writes
    after the reopen behave as on the original."""
    index, model = SparseIndex(), Model()
    index.add(*csr(batch))
    model.add(batch)
    again = SparseIndex.from_bytes(index.to_bytes())
    assert_holds(again, model)
    for q in queries:
        qi, qv = check_sparse(q)
        for a, b in zip(index.top_k(qi, qv, k), again.top_k(qi, qv, k)):
            assert np.array_equal(a, b)
        assert_same(again, model, q, k)
    index.add(*csr(later))
    again.add(*csr(later))
    model.add(later)
    assert_holds(again, model)
    assert again.to_bytes() == index.to_bytes()
    for q in queries:
        assert_same(again, model, q, k)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(SLOTS, DOCS), max_size=30), st.lists(QUERIES, max_size=8), st.integers(0, 6),
       st.one_of(st.none(), st.sets(SLOTS, max_size=40)))
def test_batched_queries_equal_single_ones(batch, queries, k, allowed):
    """top_k_batch (two threads) gives each query's top_k, padded with -inf / -1."""
    index, model = SparseIndex(), Model()
    index.add(*csr(batch))
    model.add(batch)
    bits = None if allowed is None else bitset(allowed, 150)
    scores, slots = index.top_k_batch([check_sparse(q) for q in queries], k, bits, threads=2)
    assert scores.shape == slots.shape == (len(queries), k)
    for i, q in enumerate(queries):
        want_scores, want_slots = model.top_k(q, k, None if allowed is None else allowed.__contains__)
        n = len(want_slots)
        assert slots[i, :n].tolist() == want_slots and scores[i, :n].tolist() == want_scores
        assert (slots[i, n:] == -1).all() and np.isneginf(scores[i, n:]).all()


def zipf_corpus(rng, n_docs, vocab, per_doc):
    """A SPLADE-like corpus: Zipf key frequencies, frequent keys weighing little (like an idf);
    weights multiples of 1/8 so the model's sums are exact."""
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    batch = []
    for s in range(n_docs):
        keys = np.unique(rng.choice(vocab, per_doc, p=p))
        cap = np.minimum(64, 4 + keys // 4)  # rare keys may weigh more
        w = rng.integers(1, cap + 1) / 8
        batch.append((s, dict(zip(keys.tolist(), w.tolist()))))
    return batch


def test_pruning_is_exact_and_reads_fewer_postings():
    """On a corpus spanning several windows with posting lists of thousands of entries, the
    pruned top-k equals the model's and the exhaustive one's, with and without a filter, and a
    query over frequent keys reads well under half the postings the exhaustive evaluation reads."""
    rng = np.random.default_rng(7)
    batch = zipf_corpus(rng, 12000, 400, 30)
    index, model = SparseIndex(), Model()
    for i in range(0, len(batch), 3000):  # several batches, then an overwrite and a removal
        index.add(*csr(batch[i:i + 3000]))
    model.add(batch)
    redo = [(s, {1: 8.0, 300: 8.0}) for s in range(5, 12000, 997)]
    index.add(*csr(redo))
    model.add(redo)
    gone = list(range(100, 12000, 7))
    index.remove(np.array(gone))
    model.remove(gone)
    allowed = set(range(0, 12000, 3))
    bits = bitset(allowed, 12000 // 64 + 1)
    total_pruned = total_full = 0
    for _ in range(15):
        keys = rng.choice(400, 12, replace=False, p=None)
        query = {int(k): float(rng.integers(1, 17) / 8) for k in keys}
        query[int(rng.integers(0, 5))] = 0.125  # always a frequent key
        for k in (1, 10, 50):
            assert_same(index, model, query, k)
            assert_same(index, model, query, k, bits, allowed.__contains__)
        qi, qv = check_sparse(query)
        for x, y in zip(index.top_k(qi, qv, 10, bits), index.top_k(qi, qv, 10, bits, prune=False)):
            assert np.array_equal(x, y)
        total_pruned += index.work(qi, qv, 10)
        total_full += index.work(qi, qv, 10, prune=False)
    frequent = check_sparse({0: 0.25, 1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25, 350: 2.0})
    pruned, full = index.work(*frequent, 10), index.work(*frequent, 10, prune=False)
    assert pruned < 0.5 * full, (pruned, full)
    assert total_pruned < total_full


def test_a_bad_batch_changes_nothing():
    """A batch whose last document breaks a rule raises SchemaError and leaves every document
    (also those of its valid first rows) as it was."""
    index, model = SparseIndex(), Model()
    first = [(0, {1: 1.0}), (5, {2: 2.0})]
    index.add(*csr(first))
    model.add(first)
    slots, indptr, indices, values = csr([(5, {3: 1.0}), (9, {4: 1.0, 6: 2.0})])
    for bad in (indices[::-1].copy(), np.array([3, 4, -6], np.int32)):
        with pytest.raises(SchemaError):
            index.add(slots, indptr, bad, values)
    for bad_values in (np.array([1, 1, np.nan], np.float32), np.array([1, 1, 0], np.float32),
                       np.array([1, 1, -2], np.float32), np.array([1, 1, np.inf], np.float32)):
        with pytest.raises(SchemaError):
            index.add(slots, indptr, indices, bad_values)
    with pytest.raises(SchemaError):
        index.add(np.array([5, -1]), indptr, indices, values)
    with pytest.raises(SchemaError):
        index.add(np.array([5, 2**31 - 1]), indptr, indices, values)
    with pytest.raises(SchemaError):
        index.add(slots, np.array([0, 2, 1]), indices, values)
    assert_holds(index, model)
    with pytest.raises(SchemaError):
        index.top_k(np.array([3, 1], np.int32), np.array([1, 1], np.float32), 3)  # not ascending
    with pytest.raises(SchemaError):
        index.top_k(np.array([1], np.int32), np.array([-1], np.float32), 3)


def test_empty_query_and_empty_index():
    index = SparseIndex()
    empty = check_sparse({})
    assert [a.tolist() for a in index.top_k(*empty, 5)] == [[], []]
    index.add(*csr([(3, {1: 1.0})]))
    assert [a.tolist() for a in index.top_k(*empty, 5)] == [[], []]
    assert [a.tolist() for a in index.top_k(*check_sparse({2: 1.0}), 5)] == [[], []]
    assert index.top_k(*check_sparse({1: 1.0}), 5, np.zeros(0, np.uint64))[1].tolist() == []
    index.remove(np.array([3, 3, 77, -5]))
    assert len(index) == 0 and SparseIndex.from_bytes(index.to_bytes()).stats()["docs"] == 0


# ------------------------------------------------------------ the snapshot reader

def _snapshot():
    index = SparseIndex()
    index.add(*csr(zipf_corpus(np.random.default_rng(3), 40, 30, 6)))
    return index.to_bytes()


def _load_or_backend_error(data):
    try:
        return SparseIndex.from_bytes(data)
    except BackendError:
        return None


def test_truncated_or_extended_snapshots_raise_backend_error():
    data = _snapshot()
    for n in list(range(0, 40)) + random.Random(1).sample(range(40, len(data)), 60):
        with pytest.raises(BackendError):
            SparseIndex.from_bytes(data[:n])
    with pytest.raises(BackendError):
        SparseIndex.from_bytes(data + b"\0")


def test_bit_flips_raise_backend_error():
    data = _snapshot()
    rng = random.Random(2)
    for _ in range(300):
        b = bytearray(data)
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        with pytest.raises(BackendError):
            SparseIndex.from_bytes(bytes(b))


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def test_damage_behind_a_valid_checksum_is_caught_or_harmless():
    """Bytes changed and the checksum recomputed (what a writer bug would leave): the reader
    either refuses them with BackendError or loads documents it re-exports unchanged."""
    data = _snapshot()
    body = data[:-4]
    rng = random.Random(4)
    refused = 0
    for _ in range(400):
        b = bytearray(body)
        for _ in range(rng.choice([1, 1, 2, 8])):
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256) if rng.random() < 0.5 else b[i] ^ (1 << rng.randrange(8))
        loaded = _load_or_backend_error(_with_crc(bytes(b)))
        if loaded is None:
            refused += 1
            continue
        assert loaded.to_bytes()[:-4] == bytes(b)
    assert refused > 100


def _arrays():
    a = SparseIndex.from_bytes(_snapshot()).to_arrays()
    return {k: v.copy() for k, v in a.items()}


@pytest.mark.parametrize("damage", [
    lambda a: a.pop("values"),
    lambda a: a.__setitem__("indices", a["indices"].astype(np.int64)),
    lambda a: a.__setitem__("values", a["values"][:-1].copy()),
    lambda a: a["indptr"].__setitem__(1, a["indptr"][2] + 1),
    lambda a: a["indptr"].__setitem__(-1, a["indptr"][-1] + 1),
    lambda a: a["indptr"].__setitem__(2, a["indptr"][1]),  # a slot without entries
    lambda a: a["slots"].__setitem__(1, a["slots"][0]),  # a slot twice
    lambda a: a["slots"].__setitem__(0, -3),
    lambda a: a["slots"].__setitem__(-1, 2**31 - 1),
    lambda a: a["indices"].__setitem__(slice(0, 2), a["indices"][1::-1].copy()),  # keys out of order
    lambda a: a["indices"].__setitem__(0, -1),
    lambda a: a["values"].__setitem__(0, np.nan),
    lambda a: a["values"].__setitem__(0, 0.0),
    lambda a: a["values"].__setitem__(0, -1.0),
], ids=["missing", "dtype", "length", "indptr-order", "indptr-end", "empty-row", "dup-slot",
        "neg-slot", "big-slot", "key-order", "neg-key", "nan", "zero", "negative"])
def test_from_arrays_refuses_each_damage(damage):
    arrays = _arrays()
    assert SparseIndex.from_arrays(arrays).to_arrays().keys() == arrays.keys()
    damage(arrays)
    with pytest.raises(BackendError):
        SparseIndex.from_arrays(arrays)


# ------------------------------------------------------------ check_sparse

@given(st.dictionaries(st.integers(0, 2**31 - 1), st.floats(0, 2.0**100, width=32), max_size=40))
def test_check_sparse_keeps_the_nonzero_entries_sorted(d):
    idx, val = check_sparse(d)
    assert idx.dtype == np.int32 and val.dtype == np.float32
    assert idx.tolist() == sorted(k for k, w in d.items() if w != 0)
    assert dict(zip(idx.tolist(), val.tolist())) == {k: w for k, w in d.items() if w != 0}
    pair = check_sparse((list(d), list(d.values())))
    assert np.array_equal(pair[0], idx) and np.array_equal(pair[1], val)
    arrays = check_sparse((np.array(list(d), dtype=np.int64), np.array(list(d.values()), dtype=np.float32)))
    assert np.array_equal(arrays[0], idx) and np.array_equal(arrays[1], val)


@pytest.mark.parametrize("value", [
    {"a": 1.0}, {1.0: 1.0}, {True: 1.0}, {None: 1.0},
    {-1: 1.0}, {2**31: 1.0}, {2**70: 1.0},
    {1: float("nan")}, {1: float("inf")}, {1: -float("inf")}, {1: -0.5}, {1: "2"}, {1: None}, {1: True},
    {1: 1e39}, {1: 1e-50}, {1: 10**400},
    ([1, 1], [1.0, 2.0]), ([1.5], [1.0]), (["1"], [1.0]), ([True], [1.0]), ([1, 2], [1.0]),
    ([[1]], [[1.0]]), ([-1], [1.0]), (np.array([2**31], np.uint32), [1.0]), ([1], ["x"]),
    ([1], [np.nan]), ([1], [-1.0]), ([1, 2], [1.0, 2.0], [3]), None, "1:2", [1.0, 2.0, 3.0], 5,
], ids=repr)
def test_check_sparse_refuses(value):
    with pytest.raises(SchemaError):
        check_sparse(value)


def test_check_sparse_limits_and_zeros():
    n = MAX_ENTRIES
    idx, _ = check_sparse((np.arange(n), np.ones(n)))
    assert len(idx) == n
    with pytest.raises(SchemaError, match="65536"):
        check_sparse((np.arange(n + 1), np.ones(n + 1)))
    # zeros are dropped before counting: they are not stored
    assert len(check_sparse((np.arange(n + 1), np.r_[np.ones(n), 0.0]))[0]) == n
    assert check_sparse({3: 0, 2: 0.0, 1: -0.0})[0].tolist() == []
    assert check_sparse({np.int64(2**31 - 1): np.float32(2), 0: 1})[0].tolist() == [0, 2**31 - 1]
    assert check_sparse(([], []))[0].tolist() == []
