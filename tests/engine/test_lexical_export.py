"""Export -> attach of the inverted index and the TextIndex: the attached copy reads the
exported arrays in place (as it would a mapped snapshot), answers exactly as the original,
stays equal to it under further writes (which copy each borrowed list before touching it,
never writing the arrays), and malformed arrays raise ValueError instead of crashing."""
import gc
import json
from typing import Annotated

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch._native import _kernels as K
from hybridsearch.document import schema_of
from hybridsearch.engine.lexical import TextIndex

K1, B = 1.2, 0.75
NT, NS = 40, 90  # term ids and slots the random operations draw from


def read_only(arrays: dict) -> dict:
    """Each array copied into bytes and viewed back: read-only, like a MAP_PRIVATE mapping."""
    out = {k: np.frombuffer(v.tobytes(), dtype=v.dtype) for k, v in arrays.items()}
    assert not any(v.flags.writeable for v in out.values())
    return out


def frozen(arrays: dict) -> dict:
    return {k: bytes(v.tobytes()) for k, v in arrays.items()}


# ---------------------------------------------------------------- InvertedIndex

doc_terms = st.lists(st.integers(0, NT - 1), max_size=12)
op = st.one_of(
    st.tuples(st.just("add"), st.lists(st.tuples(st.integers(0, NS - 1), doc_terms), min_size=1, max_size=6)),
    st.tuples(st.just("remove"), st.lists(st.integers(0, NS + 5), min_size=1, max_size=6)),
)
ops = st.lists(op, max_size=25)


def apply(ix, ops_):
    for kind, arg in ops_:
        if kind == "add":
            slots = np.array([s for s, _ in arg], dtype=np.int64)
            tids = np.array([t for _, ts in arg for t in ts], dtype=np.int32)
            offs = np.cumsum([0] + [len(ts) for _, ts in arg]).astype(np.int64)
            ix.add(slots, tids, offs)
        else:
            ix.remove(np.array(arg, dtype=np.int64))


def queries(seed, n=12):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        terms = np.unique(rng.integers(0, NT + 3, rng.integers(1, 6))).astype(np.int32)
        out.append((terms, rng.integers(1, 3, len(terms)).astype(np.float32)))
    return out


def assert_same(a, b, seed):
    assert (a.docs, a.total_len) == (b.docs, b.total_len)
    assert [a.df(t) for t in range(-1, NT + 2)] == [b.df(t) for t in range(-1, NT + 2)]
    ea, eb = a.export(), b.export()
    assert ea.keys() == eb.keys() and all(np.array_equal(ea[k], eb[k]) for k in ea)
    slots = np.arange(-1, NS + 3, dtype=np.int64)
    bits = np.frombuffer(np.random.default_rng(seed).bytes(16), dtype=np.uint64).copy()
    for terms, weights in queries(seed):
        for k in (1, 5, 200):
            for ex in (False, True):
                for bb in (None, bits):
                    ra, rb = a.search(terms, weights, k, K1, B, bb, ex), b.search(terms, weights, k, K1, B, bb, ex)
                    assert np.array_equal(ra[1], rb[1]) and np.array_equal(ra[0], rb[0])
        assert np.array_equal(a.score(terms, weights, slots), b.score(terms, weights, slots))
        assert np.array_equal(a.matches(terms), b.matches(terms))
        assert np.array_equal(a.matches(terms, bits), b.matches(terms, bits))


@settings(max_examples=120, deadline=None)
@given(ops, ops, st.integers(0, 2**32))
def test_attached_index_equals_the_original_before_and_after_writes(before, after, seed):
    ix = K.InvertedIndex()
    apply(ix, before)
    arrays = read_only(ix.export())
    kept = frozen(arrays)
    at = K.InvertedIndex.attach(arrays)
    assert_same(ix, at, seed)
    # further writes to both: each borrowed list is copied on its first write
    apply(ix, after)
    apply(at, after)
    assert_same(ix, at, seed)
    assert frozen(arrays) == kept  # the borrowed memory was never written


@settings(max_examples=60, deadline=None)
@given(ops, ops, ops, st.integers(0, 2**32))
def test_best_fields_over_attached_indexes(ops_a, ops_b, after, seed):
    originals, attached = [], []
    for o in (ops_a, ops_b):
        ix = K.InvertedIndex()
        apply(ix, o)
        originals.append(ix)
        attached.append(K.InvertedIndex.attach(read_only(ix.export())))
    for step in range(2):
        for (ta, wa), (tb, wb) in zip(queries(seed), queries(seed + 1)):
            for k in (1, 4, 50):
                ra = K.search_best_fields(originals, [ta, tb], [wa, wb], k, K1, B)
                rb = K.search_best_fields(attached, [ta, tb], [wa, wb], k, K1, B)
                assert np.array_equal(ra[0], rb[0]) and np.array_equal(ra[1], rb[1])
        apply(originals[0], after)
        apply(attached[0], after)


def big_index(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    ix = K.InvertedIndex()
    p = 1 / np.arange(1, 301)
    tids = rng.choice(300, n * 6, p=p / p.sum()).astype(np.int32)
    ix.add(np.arange(n, dtype=np.int64), tids, np.arange(0, n * 6 + 1, 6, dtype=np.int64))
    return ix


def test_the_index_keeps_its_arrays_alive_and_counts_borrowed_bytes():
    ix = big_index()
    arrays = read_only(ix.export())
    at = K.InvertedIndex.attach(arrays)
    owned_before = at.nbytes
    # postings + forward lists + one byte per token position (6-token documents)
    assert at.borrowed_nbytes == 2 * 2 * 4 * int(arrays["post_doc"].shape[0]) + int(arrays["fwd_pos"].shape[0])
    assert arrays["fwd_pos"].shape[0] == 3000 * 6
    assert owned_before < ix.nbytes
    q = (np.array([0, 3, 17], np.int32), np.ones(3, np.float32))
    want = ix.search(*q, 10)
    del arrays
    gc.collect()
    got = at.search(*q, 10)
    assert np.array_equal(want[0], got[0]) and np.array_equal(want[1], got[1])
    # rewriting every document moves everything to owned memory
    at.remove(np.arange(3000, dtype=np.int64))
    assert at.borrowed_nbytes == 0 and at.docs == 0


def test_an_empty_index_round_trips():
    ix = K.InvertedIndex()
    arrays = ix.export()
    assert arrays["term_off"].tolist() == [0] and arrays["slot_off"].tolist() == [0]
    at = K.InvertedIndex.attach(read_only(arrays))
    assert at.docs == 0 and at.total_len == 0
    at.add(np.array([4], np.int64), np.array([2, 2, 9], np.int32), np.array([0, 3], np.int64))
    assert at.docs == 1 and at.df(2) == 1


# -------------------------------------------------------------------- malformed

def valid_arrays():
    ix = K.InvertedIndex()
    apply(ix, [("add", [(s, [(s * 7 + j) % 11 for j in range(s % 5 + 1)] + [s % 3]) for s in range(0, 30, 2)]),
               ("remove", [4, 10])])
    return ix.export()


@pytest.mark.parametrize("name", ["term_off", "post_doc", "post_tf", "term_max_tf", "term_min_dl", "slot_off",
                                  "fwd_tid", "fwd_tf", "doc_len", "n_docs", "total_len", "pos_off", "fwd_pos"])
def test_truncated_missing_or_mistyped_arrays_raise(name):
    good = valid_arrays()
    K.InvertedIndex.attach(good)
    for bad in (good[name][:-1], good[name].astype(np.int64 if good[name].dtype != np.int64 else np.int32),
                good[name].astype(good[name].dtype.newbyteorder()), np.repeat(good[name], 2)[::2], None):
        if bad is not None and bad.size == 1 and bad.dtype == good[name].dtype:
            continue  # a strided view of one scalar is that scalar
        if bad is not None and bad.dtype == good[name].dtype and bad.flags.c_contiguous and len(bad) == len(good[name]):
            continue  # bytes have no byte order: the same array
        arrays = dict(good)
        if bad is None:
            del arrays[name]
        else:
            arrays[name] = bad
        with pytest.raises(ValueError):
            K.InvertedIndex.attach(arrays)


@pytest.mark.parametrize("name,index,value", [
    ("post_doc", 0, -1), ("post_doc", 0, 2**31 - 1), ("post_doc", -1, 29),   # beyond the slots
    ("fwd_tid", 0, -1), ("fwd_tid", -1, 11), ("fwd_tid", -1, 2**31 - 1),     # beyond the terms
    ("term_off", 1, 10**6), ("term_off", 1, -5), ("slot_off", 3, 10**6), ("slot_off", 2, -1),
    ("term_off", 0, 1), ("slot_off", -1, 0), ("post_tf", 0, 0), ("fwd_tf", 0, -3),
    ("term_max_tf", 0, 0), ("term_min_dl", 0, 0), ("term_min_dl", 0, 10**6), ("doc_len", 0, 99),
    ("n_docs", 0, 99), ("total_len", 0, 1),
    ("pos_off", 0, 1), ("pos_off", 1, 0), ("pos_off", -1, 10**6), ("pos_off", 2, -1),   # position offsets
    ("fwd_pos", 0, 200), ("fwd_pos", 1, 0), ("fwd_pos", -1, 0),   # beyond doc_len, repeated, out of order
])
def test_out_of_range_and_inconsistent_values_raise(name, index, value):
    arrays = valid_arrays()
    arrays[name] = arrays[name].copy()
    arrays[name][index] = value
    with pytest.raises(ValueError):
        K.InvertedIndex.attach(arrays)


def test_postings_that_disagree_with_the_forward_lists_only_in_pairs_are_caught():
    """Two postings of one term swap their tf: every count, sum and bound still holds,
    only the pairs differ from the forward lists (the hash over both views catches it)."""
    arrays = valid_arrays()
    off, tf = arrays["term_off"], arrays["post_tf"]
    t = next(t for t in range(len(off) - 1) if len(set(tf[off[t]:off[t + 1]].tolist())) > 1)
    seg = tf[off[t]:off[t + 1]]
    i, j = off[t] + int(np.argmin(seg)), off[t] + int(np.argmax(seg))
    swapped = tf.copy()
    swapped[i], swapped[j] = tf[j], tf[i]
    with pytest.raises(ValueError, match="disagree"):
        K.InvertedIndex.attach(dict(arrays, post_tf=swapped))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_single_damaged_value_is_rejected_or_harmless(data):
    """One value changed anywhere: rejected, unless it leaves max_tf / min_dl a valid bound
    of the term's postings, which must still answer as the original."""
    good = valid_arrays()
    name = data.draw(st.sampled_from(sorted(good)))
    arr = good[name].copy()
    i = data.draw(st.integers(0, len(arr) - 1))
    if arr.dtype == np.uint8:  # the positions
        v = data.draw(st.integers(0, 255))
    else:
        v = data.draw(st.one_of(st.integers(-3, 40), st.sampled_from([2**31 - 1, -(2**31)])))
    arr[i] = v
    arrays = dict(good, **{name: arr})
    loosened = False
    if name in ("term_max_tf", "term_min_dl"):  # still a bound of the term's current postings?
        a, b = good["term_off"][i], good["term_off"][i + 1]
        tfs, dls = good["post_tf"][a:b], good["doc_len"][good["post_doc"][a:b]]
        loosened = (v >= tfs.max(initial=-(2**31)) if name == "term_max_tf"
                    else 1 <= v <= dls.min(initial=2**31 - 1))
    if v == good[name][i] or loosened:
        at = K.InvertedIndex.attach(arrays)
        ref = K.InvertedIndex.attach(good)
        for terms, weights in queries(i, 4):
            assert np.array_equal(at.search(terms, weights, 5, K1, B, None, True)[1],
                                  ref.search(terms, weights, 5, K1, B, None, True)[1])
            assert np.array_equal(at.score(terms, weights, np.arange(30)), ref.score(terms, weights, np.arange(30)))
    else:
        with pytest.raises(ValueError):
            K.InvertedIndex.attach(arrays)


small_arrays = st.fixed_dictionaries({
    k: st.lists(st.integers(-2, 12), max_size=8).map(lambda xs, k=k: np.array(
        xs, dtype=np.int64 if k in ("term_off", "slot_off", "n_docs", "total_len") else np.int32))
    for k in ("term_off", "post_doc", "post_tf", "term_max_tf", "term_min_dl", "slot_off", "fwd_tid", "fwd_tf",
              "doc_len", "n_docs", "total_len", "pos_off")} | {
    "fwd_pos": st.lists(st.integers(0, 12), max_size=8).map(lambda xs: np.array(xs, dtype=np.uint8))})


@settings(max_examples=400, deadline=None)
@given(small_arrays)
def test_arbitrary_arrays_never_crash(arrays):
    try:
        at = K.InvertedIndex.attach(arrays)
    except ValueError:
        return
    # accepted: then it is a real index, usable for reads and writes
    terms = np.arange(13, dtype=np.int32)
    at.search(terms, np.ones(13, np.float32), 5)
    at.matches(terms)
    at.remove(np.arange(13, dtype=np.int64))
    assert at.docs == 0


# -------------------------------------------------------------------- TextIndex

class Doc(hs.Document):
    title: hs.Text = ""
    body: Annotated[hs.Text, hs.Analyzer(stemmer=None)] = ""


WORDS = ["apple", "apples", "run", "running", "ran", "blue", "Blue", "sky", "skies", "déjà", "vu",
         "naïve", "x" * 20, "data", "base", "databases", "the", "a", "fox"]
text = st.one_of(st.none(), st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join))
text_op = st.one_of(
    st.tuples(st.just("add"), st.lists(st.tuples(st.integers(0, 40), text, text), min_size=1, max_size=5)),
    st.tuples(st.just("remove"), st.lists(st.integers(0, 45), min_size=1, max_size=4)),
    st.tuples(st.just("update"), st.tuples(st.integers(0, 40), st.sampled_from(["title", "body"]), text)),
)


def apply_text(ti, ops_):
    for kind, arg in ops_:
        if kind == "add":
            ti.add(np.array([s for s, _, _ in arg], dtype=np.int64),
                   {"title": [t for _, t, _ in arg], "body": [b for _, _, b in arg]})
        elif kind == "remove":
            ti.remove(np.array(arg, dtype=np.int64))
        else:
            ti.update(arg[0], {arg[1]: arg[2]})


def assert_same_text(a, b, seed):
    rng = np.random.default_rng(seed)
    for f, g in zip(a.fields, b.fields):
        assert f.vocab == g.vocab and f.tid_of == g.tid_of
    for _ in range(8):
        q = " ".join(rng.choice(WORDS + ["unknown"], rng.integers(1, 5)))
        bits = np.frombuffer(rng.bytes(8), dtype=np.uint64).copy()
        for k in (1, 3, 60):
            for bb in (None, bits):
                ra, rb = a.search(q, k, bb), b.search(q, k, bb)
                assert np.array_equal(ra[0], rb[0]) and np.array_equal(ra[1], rb[1])
        slots = np.arange(45, dtype=np.int64)
        assert np.array_equal(a.scores(q, slots), b.scores(q, slots))
        assert np.array_equal(a.matches(q, None), b.matches(q, None))
        # the query syntax reads the positions (phrases) and the dictionaries (prefixes)
        w = rng.choice(WORDS, 4)
        sq = f'"{w[0]} {w[1]}" +{w[2]} -{w[3]} {w[0][:2]}* "{w[1]} {w[2]} {w[3]}"'
        for k in (1, 60):
            ra, rb = a.search(sq, k, None), b.search(sq, k, None)
            assert np.array_equal(ra[0], rb[0]) and np.array_equal(ra[1], rb[1])
        assert np.array_equal(a.scores(sq, slots), b.scores(sq, slots))
        assert a.count(sq, None) == b.count(sq, None)


@settings(max_examples=80, deadline=None)
@given(st.lists(text_op, max_size=15), st.lists(text_op, max_size=15), st.integers(0, 2**32))
def test_text_index_restore_equals_the_original_before_and_after_writes(before, after, seed):
    schema = schema_of(Doc)
    ti = TextIndex(schema)
    apply_text(ti, before)
    meta, arrays = ti.export()
    meta = json.loads(json.dumps(meta))  # small and JSON-serialisable
    assert all(isinstance(v, np.ndarray) for v in arrays.values())
    assert {k.split("/")[0] for k in arrays} == {"title", "body"}
    arrays = read_only(arrays)
    kept = frozen(arrays)
    back = TextIndex(schema)
    back.restore(meta, arrays)
    assert_same_text(ti, back, seed)
    apply_text(ti, after)
    apply_text(back, after)
    assert_same_text(ti, back, seed)
    assert frozen(arrays) == kept


def test_text_index_restore_rejects_bad_snapshots_and_keeps_its_state():
    schema = schema_of(Doc)
    ti = TextIndex(schema)
    apply_text(ti, [("add", [(1, "blue sky", "running fox"), (2, "apples", None)])])
    meta, arrays = ti.export()
    back = TextIndex(schema)
    apply_text(back, [("add", [(7, "data base", "vu")])])
    before = back.search("data", 5, None)

    def rejects(m, a):
        with pytest.raises(ValueError):
            back.restore(m, a)
        got = back.search("data", 5, None)
        assert np.array_equal(got[0], before[0]) and back.fields[0].vocab.keys() == {"data", "base"}

    rejects(dict(meta, format=99), arrays)
    rejects(dict(meta, fields=meta["fields"][:1]), arrays)
    rejects(dict(meta, fields=[dict(meta["fields"][0], stemmer=None), meta["fields"][1]]), arrays)
    rejects(meta, {k: v for k, v in arrays.items() if k != "body/words"})
    rejects(meta, dict(arrays, **{"body/post_doc": arrays["body/post_doc"][:-1]}))
    rejects(meta, dict(arrays, **{"title/stem_offs": arrays["title/stem_offs"][::-1].copy()}))
    rejects(meta, dict(arrays, **{"title/stems": np.frombuffer(b"\xff" * len(arrays["title/stems"]), np.uint8)}))
    rejects(meta, dict(arrays, **{"title/word_tids": arrays["title/word_tids"] + 100}))
    dup = np.array([0, 1, 2], np.int64)
    rejects(meta, dict(arrays, **{"title/stems": np.frombuffer(b"aa", np.uint8), "title/stem_offs": dup}))
    # a dictionary shorter than the index: new stems would reuse ids that have postings
    short = TextIndex(schema)
    apply_text(short, [("add", [(1, "blue", None)])])
    m2, a2 = short.export()
    rejects(meta, dict(arrays, **{"title/stems": a2["title/stems"], "title/stem_offs": a2["title/stem_offs"],
                                  "title/words": a2["title/words"], "title/word_offs": a2["title/word_offs"],
                                  "title/word_tids": a2["title/word_tids"]}))
    back.restore(meta, arrays)
    assert np.array_equal(back.search("blue", 5, None)[0], ti.search("blue", 5, None)[0])


def test_lone_surrogates_and_non_ascii_words_round_trip():
    schema = schema_of(Doc)
    ti = TextIndex(schema)
    ti.add(np.array([0, 1], np.int64), {"title": ["na\ud800ve déjà", "日本語 text"], "body": ["ünïcödé", None]})
    meta, arrays = ti.export()
    back = TextIndex(schema)
    back.restore(meta, read_only(arrays))
    for f, g in zip(ti.fields, back.fields):
        assert f.vocab == g.vocab and f.tid_of == g.tid_of
