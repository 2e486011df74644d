"""The analyzer: tokenizer against a plain reference, lowercasing, Snowball stems, batches, memo."""
import unicodedata
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridsearch as hs
# internal: the analyzer on its own (words, stems, memo) is the unit under test; find(text=...)
# shows only its effect (tests/contract/test_lexical.py)
from hybridsearch.document import schema_of
from hybridsearch.engine import analysis
from hybridsearch.engine.analysis import TextAnalyzer, analyzer_for


def reference_words(text, lowercase=True):
    """The definition, one character at a time: a word starts at a letter or digit and goes on
    through letters, digits, combining marks and ZWJ/ZWNJ; text is lowercased, then NFC."""
    if not text:
        return []
    if lowercase:
        text = text.lower()
    text = unicodedata.normalize("NFC", text)
    words, cur = [], ""
    for c in text:
        if c.isalnum() or (cur and (unicodedata.category(c)[0] == "M" or c in "\u200c\u200d")):
            cur += c
        elif cur:
            words.append(cur)
            cur = ""
    return words + [cur] if cur else words


TRICKY = "ab _-,.\u00a0\t\n1²é\u0301E\u0301İß東京ッ\u0915\u093f\u200c\u0300Σς"
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.text(alphabet=TRICKY, max_size=40)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_words_follow_the_definition_on_any_text(text):
    assert TextAnalyzer(stemmer=None).words(text) == reference_words(text)
    assert TextAnalyzer(stemmer=None, lowercase=False).words(text) == reference_words(text, lowercase=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.none() | texts | st.text(alphabet="Running runs ran ponies, caresses_ 3310", max_size=60),
                max_size=12))
def test_batch_equals_one_text_at_a_time(batch):
    for a in (TextAnalyzer(), TextAnalyzer(stemmer=None), TextAnalyzer(lowercase=False)):
        one_by_one = [a.tokens(t) for t in batch]
        assert a.batch(batch) == one_by_one
        assert TextAnalyzer(a.stemmer_name, a.lowercase).batch(batch) == one_by_one  # cold memo
        assert a.words_batch(batch) == [a.words(t) for t in batch]
        assert [a.stems(a.words(t)) for t in batch] == one_by_one


def test_unicode_words():
    a = TextAnalyzer(stemmer=None)
    assert a.tokens("Crème brûlée, café-au-lait!") == ["crème", "brûlée", "café", "au", "lait"]
    assert a.tokens("cafe\u0301") == a.tokens("café") == ["café"]             # NFD == NFC
    assert a.tokens("東京タワー 2024年") == ["東京タワー", "2024年"]           # a CJK run is one word
    assert a.tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]                     # vowel signs stay in the word
    assert a.tokens("Nokia 3310 (blue) 4G/LTE; v1.2") == ["nokia", "3310", "blue", "4g", "lte", "v1", "2"]
    assert a.tokens("snake_case__x  tabs\tand\nlines") == ["snake", "case", "x", "tabs", "and", "lines"]
    assert a.tokens("ΣΊΣΥΦΟΣ straße İstanbul") == ["σίσυφος", "straße", "i̇stanbul"]  # str.lower, not casefold
    assert a.tokens("x² ½") == ["x²", "½"]                                    # numeric characters are digits
    for empty in ("", None, "   ", "...!?", "___", "\u0301"):
        assert a.tokens(empty) == [] and a.words(empty) == []


def test_lowercase_switch():
    assert TextAnalyzer(stemmer=None).tokens("iPhone ÉCRAN") == ["iphone", "écran"]
    assert TextAnalyzer(stemmer=None, lowercase=False).tokens("iPhone ÉCRAN") == ["iPhone", "ÉCRAN"]


def test_known_english_stems():
    a = analyzer_for(None)
    assert a.tokens("Running connections caresses ponies PHONES") == ["run", "connect", "caress", "poni", "phone"]
    assert a.tokens("generously generalization hopefulness") == ["generous", "general", "hope"]
    assert a.tokens("") == [] and a.tokens(None) == []
    assert TextAnalyzer(stemmer=None).tokens("Running Phones") == ["running", "phones"]


def test_other_languages():
    assert TextAnalyzer(stemmer="french").tokens("continuellement Chevaux") == ["continuel", "cheval"]
    assert TextAnalyzer(stemmer="german").tokens("Häuser") == ["haus"]
    assert TextAnalyzer(stemmer="russian").tokens("Книги") == ["книг"]
    assert "french" in analysis.stemmer_names() and "english" in analysis.stemmer_names()


def test_unknown_stemmer_is_a_config_error_listing_the_valid_ones():
    with pytest.raises(hs.ConfigError, match="unknown stemmer 'klingon'.*english.*french"):
        TextAnalyzer(stemmer="klingon")
    with pytest.raises(hs.ConfigError, match="english"):
        analyzer_for(hs.Analyzer(stemmer=["english"]))

    class Doc(hs.Document):
        title: Annotated[hs.Text, hs.Analyzer(stemmer="klingon")]

    with pytest.raises(hs.ConfigError):
        hs.DocumentArray(Doc, storage="memory")


def test_analyzer_for_accepts_config_spec_or_none_and_caches():
    class Doc(hs.Document):
        plain: hs.Text
        exact: Annotated[hs.Text, hs.Analyzer(stemmer=None)]
        cased: Annotated[hs.Text, hs.Analyzer(stemmer="french", lowercase=False)]

    fields = schema_of(Doc).fields
    assert analyzer_for(fields["plain"]) is analyzer_for(None) is analyzer_for(hs.Analyzer())
    assert analyzer_for(fields["exact"]) is analyzer_for(hs.Analyzer(stemmer=None))
    cased = analyzer_for(fields["cased"])
    assert (cased.stemmer_name, cased.lowercase) == ("french", False)
    assert analyzer_for(None).stemmer_name == "english" and analyzer_for(None).lowercase
    with pytest.raises(hs.ConfigError):
        analyzer_for("english")


def test_memo_stems_each_word_once_and_stays_correct_when_full(monkeypatch):
    # internal: a._memo (the word -> stem cache and its stemmer) is what this test is about
    a = TextAnalyzer()
    calls = []

    class Counting:  # wraps the real stemmer and records what it is asked
        def __init__(self, inner):
            self.inner = inner

        def stemWord(self, w):
            calls.append(w)
            return self.inner.stemWord(w)

        def stemWords(self, ws):
            calls.extend(ws)
            return self.inner.stemWords(ws)

    a._memo.stemmer = Counting(a._memo.stemmer)
    texts = ["running runs running", None, "Running ponies", "runs"]
    assert a.batch(texts) == [["run", "run", "run"], [], ["run", "poni"], ["run"]]
    assert sorted(calls) == ["ponies", "running", "runs"]  # each distinct word once
    calls.clear()
    assert a.batch(texts) == [["run", "run", "run"], [], ["run", "poni"], ["run"]]
    assert a.stems(["running", "connections", "connections"]) == ["run", "connect", "connect"]
    assert calls == ["connections"]  # only the unseen word, once
    assert a._memo == {"running": "run", "runs": "run", "ponies": "poni", "connections": "connect"}

    monkeypatch.setattr(analysis, "MEMO_LIMIT", 3)  # a full memo is emptied, results unchanged
    words = "alpha betas gammas deltas epsilons running caresses".split()
    assert a.batch([" ".join(words)] * 2) == [["alpha", "beta", "gamma", "delta", "epsilon", "run", "caress"]] * 2
    assert len(a._memo) <= 3
    assert a.stems(words * 2) == ["alpha", "beta", "gamma", "delta", "epsilon", "run", "caress"] * 2
    assert len(a._memo) <= 7


def test_batch_keeps_the_gc_state():
    import gc

    a = TextAnalyzer()
    assert gc.isenabled()
    a.batch(["a b c"] * 10)
    assert gc.isenabled()
    gc.disable()
    try:
        a.batch(["a b c"] * 10)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_per_field_analyzer_is_used():
    class Doc(hs.Document):
        exact: Annotated[hs.Text, hs.Analyzer(stemmer=None)]
        stemmed: hs.Text = ""

    da = hs.DocumentArray(Doc, storage="memory")
    da.extend([{"id": "a", "exact": "running"}, {"id": "b", "exact": "x", "stemmed": "running"}])
    assert da.find(text="run").ids == ["b"]
    assert set(da.find(text="running").ids) == {"a", "b"}
