"""The native tokenizer and word dictionary (K.Lexicon, kernels/hs_lexicon.c) against the Python
analyzer: the same tokens on any text, the same postings and positions, the same BM25."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# internal: the lexicon and TextField are the units under test (find(text=...) only shows their
# effect, tests/contract/test_lexical.py); a per-token Python model is written here as the
# reference
from hybridsearch._native import _kernels as K
from hybridsearch.engine.analysis import TextAnalyzer
from hybridsearch.engine.lexical import K1, B, TextField
from tests.engine.test_invindex import Model

TRICKY = ("ab AB Zz09 _-,.;:!?'\"()[]{}\u00a0\t\n\r1²½é\u0301E\u0301İßẞ東京ッ한국어\u0915\u093f\u200c\u200d"
          "\u0300\u0301Σςσ😀👍🏽\U0001F1E9\U0001F1EAﬁǅⅫ٣")
ASCII = "Running runs ran RUNS ponies caresses_ 3310 a-b c.d e,f  \t\n_x Y2k"
texts = (st.text(alphabet=st.characters(codec="utf-8"), max_size=60) | st.text(alphabet=TRICKY, max_size=40)
         | st.text(alphabet=ASCII, max_size=80) | st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
batches = st.lists(st.none() | texts, max_size=12)
ANALYZERS = (TextAnalyzer(), TextAnalyzer(stemmer=None), TextAnalyzer(lowercase=False))


def native_words(analyzer, batch):
    """Each text's words as the native tokenizer sees them (an empty lexicon: all are new)."""
    tids, offs, new = K.Lexicon().tokenize(*analyzer.encode_batch(batch), analyzer.lowercase)
    assert (tids < 0).all()
    words = [new[-1 - t] for t in tids.tolist()]
    return [words[a:b] for a, b in zip(offs[:-1].tolist(), offs[1:].tolist())]


@settings(max_examples=300, deadline=None)
@given(batches)
def test_native_words_equal_the_python_analyzer(batch):
    for a in ANALYZERS:
        assert native_words(a, batch) == [a.words(t) for t in batch]


@settings(max_examples=150, deadline=None)
@given(batches, batches)
def test_known_words_take_their_ids_and_new_words_come_back_once(first, second):
    a = TextAnalyzer()
    lex = K.Lexicon()
    ids = {}
    index = K.InvertedIndex()

    def new_ids(words):
        assert len(set(words)) == len(words) and not set(words) & set(ids)
        for w in words:
            ids[w] = len(ids) * 3 + 1  # any ids: the lexicon must keep what it is given
        return [ids[w] for w in words]

    for batch in (first, second):
        enc = a.encode_batch(batch)
        lex.add_to(index, np.arange(len(batch), dtype=np.int64), *enc, True, new_ids)
    assert len(lex) == len(ids)
    for w, t in ids.items():
        assert lex.get(w.encode("utf-8", "surrogatepass")) == t
    tids, offs, new = lex.tokenize(*a.encode_batch(second), True)
    assert new == [] and tids.tolist() == [ids[w] for t in second for w in a.words(t)]


def test_failing_callback_changes_nothing():
    lex, index = K.Lexicon(), K.InvertedIndex()
    enc = TextAnalyzer().encode_batch(["alpha beta", "beta"])

    def boom(words):
        raise RuntimeError("stemmer down")

    with pytest.raises(RuntimeError):
        lex.add_to(index, np.arange(2, dtype=np.int64), *enc, True, boom)
    assert len(lex) == 0 and index.docs == 0
    with pytest.raises(ValueError):
        lex.add_to(index, np.arange(2, dtype=np.int64), *enc, True, lambda words: [0])  # one id short
    assert len(lex) == 0 and index.docs == 0


def test_bad_batches_are_refused():
    lex = K.Lexicon()
    buf = np.frombuffer("caf\u00e9".encode(), dtype=np.uint8)
    with pytest.raises(ValueError):  # a byte >= 0x80 in a text not sent presplit
        lex.tokenize(buf, np.array([0, len(buf)], dtype=np.int64), np.zeros(1, dtype=np.uint8))
    with pytest.raises(ValueError):
        lex.tokenize(buf, np.array([0, len(buf) + 1], dtype=np.int64), np.zeros(1, dtype=np.uint8))
    with pytest.raises(ValueError):
        lex.tokenize(buf, np.array([3, 1], dtype=np.int64), np.ones(1, dtype=np.uint8))


def test_lone_surrogates_stay_words():
    a = TextAnalyzer(stemmer=None)
    batch = ["x\ud800y abc", "\udfff"]
    assert native_words(a, batch) == [a.words(t) for t in batch]


def token_sequences(field, n):
    """Each slot's terms (stems) in token order, read back from the index's export."""
    ex = field.index.export()
    stems = list(field.vocab)
    out = []
    for s in range(n):
        if s >= len(ex["doc_len"]) or ex["doc_len"][s] == 0:
            out.append([])
            continue
        lo, hi = ex["slot_off"][s], ex["slot_off"][s + 1]
        dl = int(ex["doc_len"][s])
        width = 1 if dl <= 256 else 2 if dl <= 65536 else 4
        pos = np.frombuffer(ex["fwd_pos"][ex["pos_off"][s]:ex["pos_off"][s + 1]].tobytes(),
                            dtype={1: np.uint8, 2: np.uint16, 4: np.int32}[width])
        seq, p = [None] * dl, 0
        for t, tf in zip(ex["fwd_tid"][lo:hi].tolist(), ex["fwd_tf"][lo:hi].tolist()):
            for q in pos[p:p + tf].tolist():
                seq[q] = stems[t]
            p += tf
        out.append(seq)
    return out


@settings(max_examples=150, deadline=None)
@given(batches, batches)
def test_postings_and_positions_equal_the_analyzer_tokens(first, second):
    for a in ANALYZERS:
        f = TextField("t", a)
        f.add(np.arange(len(first), dtype=np.int64), first)
        f.add(np.arange(len(second), dtype=np.int64), second)  # re-adds replace
        final = list(second) + list(first[len(second):])
        assert token_sequences(f, len(final)) == [a.tokens(t) for t in final]
        # the Python dictionaries learnt every word, so prefix queries and export see them
        assert set(f.tid_of) == {w for t in first + second for w in a.words(t)}
        assert all(f.vocab[stem] == f.tid_of[w] for w, stem in zip(f.tid_of, a.stems(list(f.tid_of))))


def test_restore_rebuilds_the_native_lexicon():
    f = TextField("t", TextAnalyzer())
    f.add(np.arange(2, dtype=np.int64), ["Running dogs", "a dog runs"])
    g = TextField("t", TextAnalyzer())
    meta, arrays = f.export()
    g.vocab, g.tid_of, g.index = g.attached(meta, arrays)
    g.add(np.array([2], dtype=np.int64), ["dogs running fast"])
    assert token_sequences(g, 3) == [["run", "dog"], ["a", "dog", "run"], ["dog", "run", "fast"]]
    assert g.vocab == {"run": 0, "dog": 1, "a": 2, "fast": 3} and len(g._lexicon()) == len(g.tid_of) == 6


@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | texts, min_size=1, max_size=25), st.lists(texts, min_size=1, max_size=4))
def test_bm25_equals_the_python_model(docs, queries):
    a = TextAnalyzer()
    f = TextField("t", a)
    f.add(np.arange(len(docs), dtype=np.int64), docs)
    stems = {}
    model = Model()
    model.docs = {s: [stems.setdefault(t, len(stems)) for t in a.tokens(d)] for s, d in enumerate(docs)}
    for q in queries:
        want = model.scores([stems[t] for t in a.tokens(q) if t in stems])
        terms, weights = f.query(q)
        got = f.index.score(terms, weights, np.arange(len(docs), dtype=np.int64), K1, B)
        for s in range(len(docs)):
            assert math.isclose(got[s], want.get(s, 0.0), rel_tol=1e-4, abs_tol=1e-6)


def test_text_index_on_a_mixed_corpus_matches_one_text_at_a_time():
    docs = ["The Running Dogs", "Café crème, CAFÉ!", None, "東京 tower_views 42", "naïve runners run", ""]
    one = TextField("t", TextAnalyzer())
    for s, d in enumerate(docs):  # one text per batch: the smallest batches take the same path
        one.add(np.array([s], dtype=np.int64), [d])
    batch = TextField("t", TextAnalyzer())
    batch.add(np.arange(len(docs), dtype=np.int64), docs)
    assert token_sequences(one, len(docs)) == token_sequences(batch, len(docs))
