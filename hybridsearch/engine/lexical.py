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
from hybridsearch.query.text import TextQuery

K1, B = 1.2, 0.75

EXPORT_FORMAT = 1  # of TextIndex.export(): bump when its arrays change meaning


def _pack(strings: list) -> tuple:
    """Strings as one UTF-8 buffer (uint8) + int64 offsets counted in characters, so
    unpacking is one decode and one slice per string, not a decode per string."""
    offs = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)), out=offs[1:])
    # surrogatepass: a lone surrogate in a document is still a word and must round-trip
    buf = "".join(strings).encode("utf-8", "surrogatepass")
    return np.frombuffer(buf, dtype=np.uint8), offs


def _unpack(buf, offs, what: str) -> list:
    buf, offs = _array(buf, np.uint8, what + " text"), _array(offs, np.int64, what + " offsets")
    try:
        text = str(memoryview(np.ascontiguousarray(buf)), "utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise ValueError(f"the {what} are not valid UTF-8") from None
    if len(offs) < 1 or offs[0] != 0 or offs[-1] != len(text) or (len(offs) > 1 and (np.diff(offs) < 0).any()):
        raise ValueError(f"the {what} offsets do not split their text")
    o = offs.tolist()
    return list(map(text.__getitem__, map(slice, o, o[1:])))


def _array(a, dtype, what: str) -> np.ndarray:
    if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dtype) or a.ndim != 1:
        raise ValueError(f"the {what} must be a 1-d {np.dtype(dtype).name} array")
    return a


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

    def export(self) -> tuple:
        """(meta, arrays) of this field: the index arrays and both term dictionaries,
        the dictionaries as string buffers (not JSON) so 1M entries stay cheap."""
        vocab = self.vocab
        tids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
        stems = list(vocab)
        if not np.array_equal(tids, np.arange(len(vocab))):  # ids are given in insertion order
            order = np.argsort(tids)
            if not np.array_equal(tids[order], np.arange(len(vocab))):
                raise RuntimeError(f"field {self.name!r}: the term ids are not 0..n-1")
            stems = [stems[i] for i in order]
        arrays = dict(self.index.export())
        arrays["stems"], arrays["stem_offs"] = _pack(stems)
        arrays["words"], arrays["word_offs"] = _pack(list(self.tid_of))
        arrays["word_tids"] = np.fromiter(self.tid_of.values(), dtype=np.int32, count=len(self.tid_of))
        meta = {"name": self.name, "stemmer": getattr(self.analyzer, "stemmer_name", None),
                "lowercase": getattr(self.analyzer, "lowercase", None), "terms": len(stems),
                "words": len(self.tid_of)}
        return meta, arrays

    def attached(self, meta: dict, arrays: dict) -> tuple:
        """(vocab, tid_of, index) from export()'s output, all checked; assigns nothing,
        so a bad field leaves every field of a restore as it was."""
        if (meta.get("stemmer"), meta.get("lowercase")) != (getattr(self.analyzer, "stemmer_name", None),
                                                            getattr(self.analyzer, "lowercase", None)):
            raise ValueError(f"field {self.name!r}: the snapshot was analysed with stemmer="
                             f"{meta.get('stemmer')!r}, lowercase={meta.get('lowercase')!r}, not as the schema says")
        try:
            stems = _unpack(arrays["stems"], arrays["stem_offs"], "stems")
            words = _unpack(arrays["words"], arrays["word_offs"], "words")
            word_tids = _array(arrays["word_tids"], np.int32, "word_tids")
        except KeyError as e:
            raise ValueError(f"field {self.name!r}: the snapshot lacks the array {e.args[0]!r}") from None
        vocab = dict(zip(stems, range(len(stems))))
        if len(vocab) != len(stems):
            raise ValueError(f"field {self.name!r}: the stems are not distinct")
        if len(word_tids) != len(words) or (len(words) and (word_tids.min() < 0 or word_tids.max() >= len(stems))):
            raise ValueError(f"field {self.name!r}: word_tids must give each word a term id below the number of stems")
        tid_of = dict(zip(words, word_tids.tolist()))
        if len(tid_of) != len(words):
            raise ValueError(f"field {self.name!r}: the words are not distinct")
        try:
            index = K.InvertedIndex.attach(arrays)
        except ValueError as e:
            raise ValueError(f"field {self.name!r}: {e}") from None
        # a posting under a term id with no stem would be merged with the next new stem
        if len(arrays["term_off"]) - 1 > len(stems):
            raise ValueError(f"field {self.name!r}: the index has terms beyond the dictionary")
        return vocab, tid_of, index

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
        """Postings and forward lists of every field, allocated (the term dictionaries and
        what a restored index still reads from its snapshot's arrays are not counted)."""
        return sum(f.index.nbytes for f in self.fields)

    @property
    def borrowed_nbytes(self) -> int:
        """Postings and forward lists still read in place from restore()'s arrays."""
        return sum(f.index.borrowed_nbytes for f in self.fields)

    @property
    def names(self) -> list:
        return [f.name for f in self.fields]

    def update(self, slots, values: dict) -> None:
        """A partial update of rows (a slot or an array of them) to the same values: re-indexes
        only the text fields it names."""
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        for f in self.fields:
            if f.name in values:
                f.add(slots, [values[f.name]] * len(slots))

    def export(self) -> tuple:
        """(meta, arrays): every field's index and dictionaries as flat arrays named
        "<field>/<key>", meta small and JSON-serialisable, so a snapshot can store the
        arrays as they are and restore() can map them back instead of re-indexing."""
        meta = {"format": EXPORT_FORMAT, "fields": []}
        arrays = {}
        for f in self.fields:
            m, a = f.export()
            meta["fields"].append(m)
            arrays.update((f"{f.name}/{k}", v) for k, v in a.items())
        return meta, arrays

    def restore(self, meta: dict, arrays: dict) -> None:
        """Attaches every field to export()'s arrays (e.g. read-only views of a mapped file):
        the postings are read in place and copied per list on its first write; the arrays
        are referenced for as long as the indexes live. All fields or none: a malformed
        snapshot raises ValueError and leaves this index as it was."""
        if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT:
            raise ValueError(f"not a text index export of format {EXPORT_FORMAT}")
        fields = meta.get("fields")
        names = [m.get("name") if isinstance(m, dict) else None for m in fields or ()]
        if names != self.names:
            raise ValueError(f"the snapshot's text fields {names} are not the schema's {self.names}")
        done = []
        for f, m in zip(self.fields, fields):
            prefix = f.name + "/"
            done.append(f.attached(m, {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}))
        for f, (vocab, tid_of, index) in zip(self.fields, done):
            f.vocab, f.tid_of, f.index = vocab, tid_of, index

    def rebuild(self, slots: np.ndarray, columns: dict) -> None:
        """Starts over (after the slots were renumbered)."""
        for f in self.fields:
            f.index = K.InvertedIndex()
        self.add(slots, columns)

    def _queries(self, text) -> list:
        """(field, term ids, weights) per field; the text is analysed once per distinct analyzer.
        A TextQuery with field weights keeps only those fields and scales each one's query
        weights by its weight: BM25 is linear in them, so the field's score is scaled."""
        tokens: dict = {}
        out = []
        boosts = dict(text.fields) if isinstance(text, TextQuery) and text.fields else None
        raw = text.text if isinstance(text, TextQuery) else text
        for f in self.fields:
            if boosts is not None and f.name not in boosts:
                continue
            toks = tokens.get(id(f.analyzer))
            if toks is None:
                toks = tokens[id(f.analyzer)] = f.analyzer.tokens(raw)
            terms, weights = f.query_tokens(toks)
            if boosts is not None:
                weights = (weights * boosts[f.name]).astype(np.float32)
            out.append((f, terms, weights))
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

    def count(self, text: str, bits: Optional[np.ndarray]) -> int:
        """Documents where any field matches any query term (and set in bits)."""
        parts = [(f, terms) for f, terms, _ in self._queries(text) if len(terms)]
        if len(parts) == 1:  # one field: the index counts without listing
            return parts[0][0].index.count(parts[0][1], bits)
        return len(self.matches(text, bits))

    def matches(self, text: str, bits: Optional[np.ndarray]) -> np.ndarray:
        """Slots where any field matches any query term."""
        parts = [f.index.matches(terms, bits) for f, terms, _ in self._queries(text) if len(terms)]
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate(parts))
