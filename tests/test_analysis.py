"""The analyzer: tokenizer against a regex reference, lowercasing, Snowball stems, batches."""
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridsearch as hs
from hybridsearch.analysis import TextAnalyzer, analyzer_for

WORD = re.compile(r"[^\W_]+")  # the definition: runs of Unicode letters and digits


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.text(alphabet="ab _-,.\u00a0\t\n1é東", max_size=40))
def test_words_are_the_regex_definition_on_any_text(text):
    a = TextAnalyzer(stemmer=None)
    assert a.words(text) == WORD.findall(text.lower())
    assert TextAnalyzer(stemmer=None, lowercase=False).words(text) == WORD.findall(text)


def test_known_english_stems():
    a = analyzer_for(None)
    assert a.tokens("Running connections caresses ponies PHONES") == ["run", "connect", "caress", "poni", "phone"]
    assert a.tokens("") == [] and a.tokens(None) == []
    assert TextAnalyzer(stemmer=None).tokens("Running Phones") == ["running", "phones"]
    assert TextAnalyzer(stemmer="french").tokens("continuellement") == ["continuel"]


def test_batch_equals_one_by_one_and_memo_is_consistent():
    a = TextAnalyzer()
    texts = ["Running fast", None, "runs ran runner", "", "café_au_lait 3310", "running"]
    assert a.batch(texts) == [a.tokens(t) for t in texts]
    assert a.stems(["running", "running", "phones"]) == ["run", "run", "phone"]


def test_unknown_stemmer_is_a_config_error():
    with pytest.raises(hs.ConfigError, match="unknown stemmer"):
        TextAnalyzer(stemmer="klingon")

    from typing import Annotated

    class Doc(hs.Document):
        title: Annotated[hs.Text, hs.Analyzer(stemmer="klingon")]

    with pytest.raises(hs.ConfigError):
        hs.DocumentArray(Doc, storage="memory")


def test_per_field_analyzer_is_used():
    from typing import Annotated

    class Doc(hs.Document):
        exact: Annotated[hs.Text, hs.Analyzer(stemmer=None)]
        stemmed: hs.Text = ""

    da = hs.DocumentArray(Doc, storage="memory")
    da.extend([{"id": "a", "exact": "running"}, {"id": "b", "exact": "x", "stemmed": "running"}])
    assert da.find(text="run").ids == ["b"]
    assert set(da.find(text="running").ids) == {"a", "b"}
