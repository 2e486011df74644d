"""Lexical search over a collection's hs.Text fields: one native inverted index per field.

Best fields (Elasticsearch `multi_match` `best_fields`): a document's score is
its best field's BM25. The exact top-k of that maximum is found from each
field's exact top-k: a document in the overall top-k reaches its score in some
field f, and in f at most k-1 documents can beat it (each of them would beat it
overall too), so it is in f's top-k. The union of the per-field top-k lists is
re-scored in every field and the best k kept.
"""
from __future__ import annotations

from itertools import chain
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.document import Kind, Schema
from hybridsearch.engine.analysis import analyzer_for

K1, B = 1.2, 0.75


class TextField:
    """The analyzer, the term dictionary and the inverted index of one hs.Text field."""

    def __init__(self, name: str, analyzer) -> None:
        self.name = name
        self.analyzer = analyzer
        self.vocab: dict = {}   # stem -> term id
        self.tid_of: dict = {}  # word as written (after lowercasing) -> term id
        self.index = K.InvertedIndex()

    def add(self, slots: np.ndarray, texts: list) -> None:
        # word -> term id in one dict, so the per-token work is one C-level lookup
        word_lists = self.analyzer.words_batch(texts)
        flat = list(chain.from_iterable(word_lists))
        tid_of = self.tid_of
        unseen = [w for w in set(flat) if w not in tid_of]
        if unseen:
            vocab = self.vocab
            for w, stem in zip(unseen, self.analyzer.stems(unseen)):
                t = vocab.get(stem)
                if t is None:
                    t = vocab[stem] = len(vocab)
                tid_of[w] = t
        tids = np.fromiter(map(tid_of.__getitem__, flat), dtype=np.int32, count=len(flat))
        offs = np.zeros(len(word_lists) + 1, dtype=np.int64)
        np.cumsum([len(ws) for ws in word_lists], out=offs[1:])
        self.index.add(np.ascontiguousarray(slots, dtype=np.int64), tids, offs)

    def query(self, text: str) -> tuple:
        """(term ids, weights): each known term once, weighted by its occurrences."""
        return self.query_tokens(self.analyzer.tokens(text))

    def query_tokens(self, tokens) -> tuple:
        """(term ids, weights) of already analysed query tokens."""
        counts: dict = {}
        vocab = self.vocab
        for tok in tokens:
            t = vocab.get(tok)
            if t is not None:
                counts[t] = counts.get(t, 0) + 1
        return (np.fromiter(counts.keys(), dtype=np.int32, count=len(counts)),
                np.fromiter(counts.values(), dtype=np.float32, count=len(counts)))


class TextIndex:
    """Every hs.Text field of a schema, kept in step with the collection's slots."""

    def __init__(self, schema: Schema) -> None:
        self.fields = [TextField(spec.name, analyzer_for(spec.analyzer))
                       for spec in schema.fields.values() if spec.kind is Kind.TEXT]

    def __bool__(self) -> bool:
        return bool(self.fields)

    def add(self, slots: np.ndarray, columns: dict) -> None:
        """(Re-)indexes the rows at these slots; columns: text field -> list of str or None."""
        for f in self.fields:
            f.add(slots, columns[f.name])

    def remove(self, slots: np.ndarray) -> None:
        for f in self.fields:
            f.index.remove(np.ascontiguousarray(slots, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Postings and forward lists of every field (the term dictionaries are not counted)."""
        return sum(f.index.nbytes for f in self.fields)

    @property
    def names(self) -> list:
        return [f.name for f in self.fields]

    def update(self, slot: int, values: dict) -> None:
        """A partial update: re-indexes only the text fields it names."""
        one = np.array([slot], dtype=np.int64)
        for f in self.fields:
            if f.name in values:
                f.add(one, [values[f.name]])

    def rebuild(self, slots: np.ndarray, columns: dict) -> None:
        """Starts over (after the slots were renumbered)."""
        for f in self.fields:
            f.index = K.InvertedIndex()
        self.add(slots, columns)

    def _queries(self, text: str) -> list:
        """(field, term ids, weights) per field; the text is analysed once per distinct analyzer."""
        tokens: dict = {}
        out = []
        for f in self.fields:
            toks = tokens.get(id(f.analyzer))
            if toks is None:
                toks = tokens[id(f.analyzer)] = f.analyzer.tokens(text)
            out.append((f, *f.query_tokens(toks)))
        return out

    def scores(self, text: str, slots: np.ndarray, queries: Optional[list] = None) -> np.ndarray:
        """Best-field BM25 of the given slots (0 where no field matches)."""
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        best = np.zeros(len(slots), dtype=np.float32)
        for f, terms, weights in queries or self._queries(text):
            if len(terms):
                np.maximum(best, f.index.score(terms, weights, slots, K1, B), out=best)
        return best

    def search(self, text: str, k: int, bits: Optional[np.ndarray]) -> tuple:
        """Exact best-fields top-k -> (slots int64, scores float32), best first, ties to the lower slot."""
        queries = self._queries(text)
        scores, slots = K.search_best_fields([f.index for f, _, _ in queries], [t for _, t, _ in queries],
                                             [w for _, _, w in queries], k, K1, B, bits)
        n = int(np.count_nonzero(slots >= 0))
        return slots[:n], scores[:n]

    def matches(self, text: str, bits: Optional[np.ndarray]) -> np.ndarray:
        """Slots where any field matches any query term."""
        parts = [f.index.matches(terms, bits) for f, terms, _ in self._queries(text) if len(terms)]
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(parts))
