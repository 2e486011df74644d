"""Text analysis shared by every embedded storage: Unicode words, lowercasing, Snowball stemming.

Stemming goes through PyStemmer (the Snowball algorithms compiled in C). A batch
is tokenised with one regex pass per text and every distinct unseen word is
stemmed once, in one call; stems are memoised per analyzer.
"""
from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Optional

import Stemmer

from .document import Analyzer
from .errors import ConfigError

_WORD = re.compile(r"[^\W_]+")  # runs of Unicode letters and digits; "_" separates
_MEMO_LIMIT = 1_000_000


class TextAnalyzer:
    """Tokenizer + optional lowercasing + optional Snowball stemmer."""

    def __init__(self, stemmer: Optional[str] = "english", lowercase: bool = True) -> None:
        if stemmer is not None and stemmer not in Stemmer.algorithms():
            raise ConfigError(f"unknown stemmer {stemmer!r}; valid: None, {', '.join(sorted(Stemmer.algorithms()))}")
        self.stemmer_name = stemmer
        self.lowercase = lowercase
        self._stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self._memo: dict = {}
        self._lock = threading.Lock()  # PyStemmer objects are not thread-safe

    def words(self, text: Optional[str]) -> list:
        """The words of a text before stemming (lowercased if configured)."""
        if not text:
            return []
        if self.lowercase:
            text = text.lower()
        parts = text.split()
        # most text is words and spaces: then str.split is the tokenizer (10x a regex)
        if "".join(parts).isalnum():
            return parts
        return _WORD.findall(text)

    def stems(self, words: list) -> list:
        """The stem of each word (the words themselves without a stemmer)."""
        if self._stemmer is None:
            return list(words)
        memo = self._stem_all(words)
        return [memo[w] for w in words]

    def _stem_all(self, words: list) -> dict:
        memo = self._memo
        new = [w for w in set(words) if w not in memo]
        if new:
            with self._lock:
                stems = self._stemmer.stemWords(new)
            if len(memo) + len(new) > _MEMO_LIMIT:
                memo.clear()
            memo.update(zip(new, stems))
        return memo

    def tokens(self, text: Optional[str]) -> list:
        """The terms of one text, in order."""
        words = self.words(text)
        if self._stemmer is None or not words:
            return words
        memo = self._stem_all(words)
        return [memo[w] for w in words]

    def batch(self, texts: list) -> list:
        """The terms of many texts (None -> []): one stemming call for all unseen words."""
        word_lists = [self.words(t) for t in texts]
        if self._stemmer is None:
            return word_lists
        memo = self._stem_all([w for ws in word_lists for w in ws])
        return [[memo[w] for w in ws] for ws in word_lists]


@lru_cache(maxsize=None)
def _cached(stemmer: Optional[str], lowercase: bool) -> TextAnalyzer:
    return TextAnalyzer(stemmer, lowercase)


def analyzer_for(config: Optional[Analyzer] = None) -> TextAnalyzer:
    """The (shared) analyzer of an hs.Analyzer config; None -> English stemming, lowercased."""
    config = config or Analyzer()
    return _cached(config.stemmer, config.lowercase)
