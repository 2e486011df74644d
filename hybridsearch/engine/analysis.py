"""Text analysis shared by every embedded storage: Unicode words, lowercasing, Snowball stemming.

A word is a run of Unicode letters and digits (``str.isalnum``; ``_`` and every
other character separate words), which may carry combining marks and ZWJ/ZWNJ
after its first character (so "हिन्दी" or a decomposed "café" stay one word). Text
is lowercased with ``str.lower`` (not casefold: "ß" stays "ß") and put in Unicode
NFC, so composed and decomposed accents give the same word. A run of CJK
ideographs is one word (no dictionary segmentation).

Stemming is Snowball through PyStemmer (the algorithms compiled in C). Each
analyzer memoises word -> stem, so a batch stems every distinct unseen word once
and every other token costs one dict lookup. ASCII text (the common case) is split
by ``str.translate`` + ``str.split`` (C, no regex); other text by one regex pass.
"""
from __future__ import annotations

import gc
import re
import threading
import unicodedata
from contextlib import contextmanager
from functools import lru_cache
from typing import Optional, Union

import numpy as np
import Stemmer

from hybridsearch.document import Analyzer, FieldSpec
from hybridsearch.errors import ConfigError

MEMO_LIMIT = 1_000_000  # word -> stem entries kept per analyzer; cleared when full

_JOINERS = "\u200c\u200d"  # ZWNJ, ZWJ: inside Persian and Indic words
_word_re: Optional[re.Pattern] = None


def _word_pattern() -> re.Pattern:
    """letter/digit, then letters, digits, combining marks, ZWJ/ZWNJ (built on first non-ASCII text)."""
    global _word_re
    if _word_re is None:
        category = unicodedata.category
        ranges, start, prev = [], None, 0
        for cp in range(0x110000):
            if category(chr(cp))[0] == "M":
                if start is None:
                    start = cp
                prev = cp
            elif start is not None:
                ranges.append(f"\\U{start:08x}-\\U{prev:08x}")
                start = None
        marks = "".join(ranges) + "".join(f"\\U{ord(c):08x}" for c in _JOINERS)
        # "_" is replaced by a space before matching, so \w here means letter or digit
        _word_re = re.compile(f"\\w[\\w{marks}]*")
    return _word_re


def _ascii_table(lowercase: bool) -> dict:
    """ASCII: letters and digits kept (lowercased if asked), everything else -> space."""
    table = {}
    for cp in range(128):
        c = chr(cp)
        if not c.isalnum():
            table[cp] = " "
        elif lowercase and c.isupper():
            table[cp] = c.lower()
    return table


def stemmer_names() -> list:
    """The Snowball stemmers available for `hs.Analyzer(stemmer=...)`."""
    return sorted(Stemmer.algorithms())


@contextmanager
def _gc_paused():
    """Batches allocate a list per text: pause the cyclic GC, whose full passes over
    those lists would otherwise cost more than the tokenising (nothing here forms cycles)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _StemMemo(dict):
    """word -> stem; a missing word is stemmed (once) on first lookup."""

    __slots__ = ("stemmer", "lock")

    def __init__(self, stemmer) -> None:
        super().__init__()
        self.stemmer = stemmer
        self.lock = threading.Lock()  # a PyStemmer object is not thread-safe

    def __missing__(self, word: str) -> str:
        with self.lock:
            stem = self.stemmer.stemWord(word)
        if len(self) >= MEMO_LIMIT:
            self.clear()
        self[word] = stem
        return stem

    def add_many(self, words) -> None:
        """Stems the distinct unseen words among `words` in one stemWords call."""
        new = [w for w in dict.fromkeys(words) if w not in self]
        if new:
            with self.lock:
                stems = self.stemmer.stemWords(new)
            if len(self) + len(new) > MEMO_LIMIT:
                self.clear()
            self.update(zip(new, stems))


class TextAnalyzer:
    """Tokenizer + optional lowercasing + optional Snowball stemmer (None: no stemming)."""

    def __init__(self, stemmer: Optional[str] = "english", lowercase: bool = True) -> None:
        if stemmer is not None and (not isinstance(stemmer, str) or stemmer not in Stemmer.algorithms()):
            raise ConfigError(f"unknown stemmer {stemmer!r}; valid: None, {', '.join(stemmer_names())}")
        self.stemmer_name = stemmer
        self.lowercase = lowercase
        self._table = _ascii_table(lowercase)
        self._memo: Optional[_StemMemo] = _StemMemo(Stemmer.Stemmer(stemmer)) if stemmer else None

    def __repr__(self) -> str:
        return f"TextAnalyzer(stemmer={self.stemmer_name!r}, lowercase={self.lowercase})"

    def _other_words(self, text: str) -> list:
        if self.lowercase:
            text = text.lower()
        text = unicodedata.normalize("NFC", text.replace("_", " "))
        return _word_pattern().findall(text)

    def words(self, text: Optional[str]) -> list:
        """The words of a text before stemming (lowercased if configured); None -> []."""
        if not text:
            return []
        if text.isascii():
            return text.translate(self._table).split()
        return self._other_words(text)

    def words_batch(self, texts: list) -> list:
        """`[words(t) for t in texts]`, faster."""
        table, other = self._table, self._other_words
        with _gc_paused():
            return [(t.translate(table).split() if t.isascii() else other(t)) if t else [] for t in texts]

    def encode_batch(self, texts: list) -> tuple:
        """(UTF-8 bytes uint8, byte offsets int64 (n+1), presplit uint8 (n)) of a batch for the
        native tokenizer (kernels/hs_lexicon.h). An ASCII text goes as it is: C splits it at every
        byte that is not [0-9A-Za-z] and lowercases A-Z, which is exactly `words` on ASCII. Any
        other text goes as its `words` joined by spaces (presplit), so str.lower, NFC and the word
        pattern stay in Python and the tokens cannot differ. None and "" have no words."""
        texts = [t or "" for t in texts]
        n = len(texts)
        joined = "".join(texts)
        offs = np.zeros(n + 1, dtype=np.int64)
        if joined.isascii():  # the common case: one encode, no per-text work beyond the lengths
            np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=n), out=offs[1:])
            return np.frombuffer(joined.encode("ascii"), dtype=np.uint8), offs, np.zeros(n, dtype=np.uint8)
        presplit = np.fromiter((not t.isascii() for t in texts), dtype=np.uint8, count=n)
        other = self._other_words
        # surrogatepass: a lone surrogate stays in its word, as the Python path keeps it
        parts = [" ".join(other(t)).encode("utf-8", "surrogatepass") if p else t.encode("ascii")
                 for t, p in zip(texts, presplit.tolist())]
        np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=n), out=offs[1:])
        return np.frombuffer(b"".join(parts), dtype=np.uint8), offs, presplit

    def stems(self, words: list) -> list:
        """The stem of each word (the words themselves without a stemmer)."""
        memo = self._memo
        if memo is None:
            return list(words)
        memo.add_many(words)
        return list(map(memo.__getitem__, words))

    def tokens(self, text: Optional[str]) -> list:
        """The terms of one text, in order; None -> []."""
        words = self.words(text)
        if self._memo is None:
            return words
        return list(map(self._memo.__getitem__, words))

    def batch(self, texts: list) -> list:
        """`[tokens(t) for t in texts]` in one pass: each distinct unseen word is stemmed once."""
        memo = self._memo
        if memo is None:
            return self.words_batch(texts)
        table, other, stem = self._table, self._other_words, memo.__getitem__
        with _gc_paused():
            return [list(map(stem, t.translate(table).split() if t.isascii() else other(t))) if t else []
                    for t in texts]


_known_settings: set = set()  # the (stemmer, lowercase) pairs _cached has made an analyzer for


@lru_cache(maxsize=None)
def _cached(stemmer: Optional[str], lowercase: bool) -> TextAnalyzer:
    _known_settings.add((stemmer, lowercase))
    return TextAnalyzer(stemmer, lowercase)


def analyzer_for(config: Union[Analyzer, FieldSpec, None] = None) -> TextAnalyzer:
    """The shared analyzer of an hs.Analyzer, of a Text FieldSpec (its `analyzer`), or of
    None (English stemming, lowercased); one TextAnalyzer, and so one memo, per setting."""
    if isinstance(config, FieldSpec):
        config = config.analyzer
    if config is None:
        config = Analyzer()
    elif not isinstance(config, Analyzer):
        raise ConfigError(f"expected an hs.Analyzer, a FieldSpec or None, got {config!r}")
    if config.stemmer is not None and not isinstance(config.stemmer, str):
        raise ConfigError(f"stemmer must be a name or None, got {config.stemmer!r}; valid: "
                          f"None, {', '.join(stemmer_names())}")
    return _cached(config.stemmer, bool(config.lowercase))


def forget_stems() -> None:
    """Empties every shared analyzer's stem memo, so the next batch stems its words again:
    a benchmark that builds several collections in one process starts each one cold."""
    for stemmer, lowercase in list(_known_settings):
        memo = _cached(stemmer, lowercase)._memo
        if memo is not None:
            memo.clear()
