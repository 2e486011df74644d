"""The native boolean query (term, phrase and any-of clauses; should, must, must not; best field
wins) against a plain-Python model over term ids, through updates, deletes and export -> attach,
which must carry the token positions."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# internal: the native index with term ids and positions, below the analyzer and the parser;
# tests/contract/test_query_syntax.py checks the same semantics through find(text=...)
from hybridsearch._native import _kernels as K

K1, B = 1.2, 0.75
NT = 5  # few term ids, so phrases occur and repeat terms


def field_model(docs, clauses, excluded_everywhere):
    """{slot: score} of one field; docs = {slot: [term ids in order]}."""
    live = {s: t for s, t in docs.items() if t}
    n = len(live)
    if not n:
        return {}
    avgdl = sum(len(t) for t in live.values()) / n

    def idf(t):
        df = sum(1 for u in live.values() if t in u)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def norm(freq, dl):
        return freq / (freq + K1 * (1 - B + B * dl / avgdl))

    out = {}
    must = [c for c in clauses if c[1] == "must"]
    should = [c for c in clauses if c[1] == "should"]
    if not must and not should:
        return out
    for s, toks in live.items():
        if s in excluded_everywhere:
            continue

        def score(c):
            kind, _, terms, w = c
            if kind == "any":
                return w if any(t in toks for t in terms) else None
            if kind == "term":
                f = toks.count(terms[0])
                return w * idf(terms[0]) * norm(f, len(toks)) if f else None
            m = len(terms)
            f = sum(1 for p in range(len(toks) - m + 1) if toks[p:p + m] == list(terms))
            return w * sum(idf(t) for t in terms) * norm(f, len(toks)) if f else None

        got = [score(c) for c in must]
        if any(g is None for g in got):
            continue
        opt = [g for g in (score(c) for c in should) if g is not None]
        if not must and not opt:
            continue
        out[s] = sum(got) + sum(opt)
    return out


def excluded(fields, clauses):
    out = set()
    for docs, cls in zip(fields, clauses):
        for kind, occur, terms, _ in cls:
            if occur != "must_not":
                continue
            for s, toks in docs.items():
                m = len(terms)
                if kind == "any" and any(t in toks for t in terms):
                    out.add(s)
                elif kind != "any" and any(toks[p:p + m] == list(terms) for p in range(len(toks) - m + 1)):
                    out.add(s)
    return out


def model(fields, clauses, allowed=None):
    ex = excluded(fields, clauses)
    best = {}
    for docs, cls in zip(fields, clauses):
        for s, v in field_model(docs, cls, ex).items():
            if allowed is None or s in allowed:
                best[s] = max(best.get(s, -1.0), v)
    return best


def index(docs, ix=None):
    ix = ix or K.InvertedIndex()
    slots = np.array(list(docs), dtype=np.int64)
    ix.add(slots, np.array([t for s in docs for t in docs[s]], dtype=np.int32),
           np.cumsum([0] + [len(docs[s]) for s in docs]).astype(np.int64))
    return ix


def check(ixs, fields, clauses, k, bits=None, allowed=None):
    ref = model(fields, clauses, allowed)
    slots, scores = K.query_best_fields(ixs, clauses, None, K1, B, bits)
    assert slots.tolist() == sorted(ref)
    for s, v in zip(slots.tolist(), scores.tolist()):
        assert math.isclose(v, ref[s], rel_tol=1e-4, abs_tol=1e-6), (s, v, ref[s])
    top, tslots, total = K.query_best_fields(ixs, clauses, k, K1, B, bits)
    assert total == -1  # a top-k search prunes: it does not count
    assert K.query_best_fields(ixs, clauses, 0, K1, B, bits)[2] == len(ref)
    got = [(int(s), float(v)) for s, v in zip(tslots, top) if s >= 0]
    assert len(got) == min(k, len(ref)) and all(s == -1 for s in tslots[len(got):])
    want = sorted(ref.items(), key=lambda p: (-np.float32(p[1]), p[0]))[:k]
    assert [s for s, _ in got] == [s for s, _ in want] or all(
        math.isclose(a[1], b[1], rel_tol=1e-5) for a, b in zip(got, want))  # equal scores may swap


doc = st.lists(st.integers(0, NT - 1), max_size=10)
docs = st.dictionaries(st.integers(0, 70), doc, max_size=30)
clause = st.one_of(
    st.tuples(st.just("term"), st.sampled_from(["should", "must", "must_not"]), st.lists(st.integers(-1, NT + 1),
              min_size=1, max_size=1), st.sampled_from([1.0, 2.0, 0.5])),
    st.tuples(st.just("phrase"), st.sampled_from(["should", "must", "must_not"]),
              st.lists(st.integers(0, NT), min_size=1, max_size=4), st.sampled_from([1.0, 3.0])),
    st.tuples(st.just("any"), st.sampled_from(["should", "must", "must_not"]),
              st.lists(st.integers(0, NT + 2), max_size=4), st.sampled_from([1.0, 2.0])),
)
clauses = st.lists(clause, max_size=5)


def windows(data, docs_, cls):
    """cls plus phrases cut from the documents, so that phrases match (repeated terms too)."""
    texts = [t for t in docs_.values() if len(t) >= 2]
    out = list(cls)
    for _ in range(data.draw(st.integers(0, 3)) if texts else 0):
        t = data.draw(st.sampled_from(texts))
        a = data.draw(st.integers(0, len(t) - 2))
        b = data.draw(st.integers(a + 2, min(len(t), a + 5)))
        out.append(("phrase", data.draw(st.sampled_from(["should", "must", "must_not"])), t[a:b],
                    data.draw(st.sampled_from([1.0, 2.0]))))
    return out


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs, docs, clauses, clauses, st.integers(1, 12), st.one_of(st.none(), st.integers(0, 2**32)), st.data())
def test_boolean_query_equals_the_model(docs_a, docs_b, cl_a, cl_b, k, seed, data):
    fields = [docs_a, docs_b]
    cl_a, cl_b = windows(data, docs_a, cl_a), windows(data, docs_b, cl_b)
    ixs = [index(d) for d in fields]
    bits, allowed = None, None
    if seed is not None:
        rng = np.random.default_rng(seed)
        allowed = {s for s in range(71) if rng.random() < 0.6}
        bits = np.zeros(2, dtype=np.uint64)
        for s in allowed:
            bits[s >> 6] |= np.uint64(1) << np.uint64(s & 63)
    check(ixs, fields, [cl_a, cl_b], k, bits, allowed)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs, st.lists(st.tuples(st.integers(0, 70), st.one_of(st.none(), doc)), max_size=12), clauses,
       st.integers(1, 8), st.data())
def test_positions_survive_updates_deletes_and_export_attach(first, writes, cls, k, data):
    """Re-adds and deletes replace a document's positions whole; an attached copy reads the
    exported positions in place, and writes to it (copying lists) keep both views right."""
    cls = windows(data, {**first, **{s: t for s, t in writes if t}}, cls)
    ix = index(first)
    cur = dict(first)
    for slot, toks in writes[: len(writes) // 2]:
        if toks is None:
            ix.remove(np.array([slot], np.int64))
            cur.pop(slot, None)
        else:
            index({slot: toks}, ix)
            cur[slot] = toks
    check([ix], [cur], [cls], k)
    arrays = {name: np.frombuffer(a.tobytes(), dtype=a.dtype) for name, a in ix.export().items()}  # read-only
    at = K.InvertedIndex.attach(arrays)
    check([at], [cur], [cls], k)
    for slot, toks in writes[len(writes) // 2:]:
        if toks is None:
            at.remove(np.array([slot], np.int64))
            cur.pop(slot, None)
        else:
            index({slot: toks}, at)
            cur[slot] = toks
    check([at], [cur], [cls], k)
    again = K.InvertedIndex.attach(at.export())
    check([again], [cur], [cls], k)


def test_a_long_document_keeps_wide_positions():
    """Positions past 255 and past 65,535 take 2 and 4 bytes; phrases still match there."""
    for n in (300, 70_000):
        toks = [1] * n
        toks[n - 2:] = [2, 3]
        ix = index({0: toks, 5: [2, 3, 2, 3]})
        exported = ix.export()
        assert len(exported["fwd_pos"]) == n * (2 if n <= 65536 else 4) + 4
        for idx in (ix, K.InvertedIndex.attach(exported)):
            slots, _ = K.query_best_fields([idx], [[("phrase", "must", [2, 3], 1.0)]], None)
            assert slots.tolist() == [0, 5]
            slots, _ = K.query_best_fields([idx], [[("phrase", "must", [1, 2, 3], 1.0)]], None)
            assert slots.tolist() == [0]


def test_phrase_frequency_counts_overlapping_occurrences_and_sums_idf():
    ix = index({0: [1, 1, 1], 1: [2], 2: [1, 2]})
    ref = model([{0: [1, 1, 1], 1: [2], 2: [1, 2]}], [[("phrase", "should", [1, 1], 1.0)]])
    assert list(ref) == [0]  # "1 1" occurs twice (overlapping) in slot 0 only
    slots, scores = K.query_best_fields([ix], [[("phrase", "should", [1, 1], 1.0)]], None)
    assert slots.tolist() == [0] and math.isclose(scores[0], ref[0], rel_tol=1e-6)


def test_arguments_are_checked():
    ix = K.InvertedIndex()
    with pytest.raises(ValueError):
        K.query_best_fields([ix], [], 3)
    with pytest.raises(KeyError):
        K.query_best_fields([ix], [[("nope", "must", [1], 1.0)]], 3)
    with pytest.raises(ValueError):
        K.query_best_fields([ix], [[("term", "must", [1], 1.0)]], -1)
    scores, slots, total = K.query_best_fields([ix], [[("term", "must", [1], 1.0)]], 2)
    assert slots.tolist() == [-1, -1] and total == -1
    assert K.query_best_fields([ix], [[("term", "must", [1], 1.0)]], 0)[2] == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.sampled_from([1, 2, 5, 20]), st.booleans())
def test_a_top_k_skips_only_documents_that_cannot_enter_it(seed, k, two_fields):
    """Phrases in a top-k search skip candidates whose bound cannot beat the k-th score: the
    result equals the first k of every match ranked (score descending, then slot), on documents
    of many lengths where the bounds bite."""
    rng = np.random.default_rng(seed)
    fields = [{s: rng.integers(0, 4, rng.integers(1, 30)).tolist() for s in range(2500) if rng.random() < 0.9}
              for _ in range(2 if two_fields else 1)]
    ixs = [index(d) for d in fields]
    for _ in range(6):
        clauses = []
        for _ in fields:
            cl = [("phrase", str(rng.choice(["should", "must"])), rng.integers(0, 4, rng.integers(2, 4)).tolist(),
                   float(rng.choice([1.0, 2.0])))]
            if rng.random() < 0.5:
                cl.append(("term", str(rng.choice(["should", "must"])), [int(rng.integers(0, 5))], 1.0))
            if rng.random() < 0.3:
                cl.append(("phrase", "should", rng.integers(0, 4, 2).tolist(), 1.0))
            clauses.append(cl)
        slots, scores = K.query_best_fields(ixs, clauses, None)
        order = np.lexsort((slots, -scores))[:k]
        top, tslots, _ = K.query_best_fields(ixs, clauses, k)
        n = int(np.count_nonzero(tslots >= 0))
        assert tslots[:n].tolist() == slots[order].tolist()
        assert top[:n].tolist() == scores[order].tolist()
