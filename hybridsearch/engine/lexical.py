"""Lexical search over a collection's hs.Text fields: one native inverted index per field.

Best fields (Elasticsearch `multi_match` `best_fields`): a document's score is
its best field's BM25. The exact top-k of that maximum is found from each
field's exact top-k: a document in the overall top-k reaches its score in some
field f, and in f at most k-1 documents can beat it (each of them would beat it
overall too), so it is in f's top-k. The union of the per-field top-k lists is
re-scored in every field and the best k kept.

A query using the syntax of query/text.py (phrases, +required, -excluded, prefix*) or
operator="and" is compiled per field into clauses (term, phrase, any-of-terms; should, must,
must not) and answered by one native boolean-query call over every field
(kernels/hs_invquery.c), which scores every match exactly; a plain OR of words keeps the
MaxScore search above. Both give the same scores for the same plain query.
"""
from __future__ import annotations

import os
from bisect import bisect_left
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.document import Kind, Schema
from hybridsearch.engine.analysis import analyzer_for
from hybridsearch.query.text import MUST, MUST_NOT, SHOULD, TextQuery, parse_text, uses_syntax

K1, B = 1.2, 0.75

# of TextIndex.export(): bump when its arrays change meaning; restore() refuses any other
EXPORT_FORMAT = 2
# a batch indexes its text fields on threads from this many rows: below it, starting the threads
# costs more than the overlap saves (each field's tokenising and postings run without the GIL)
PARALLEL_MIN_ROWS = 4096


class UnsupportedFormat(ValueError):
    """An export of another EXPORT_FORMAT: well formed, but not one this version reads."""


def _pack(strings: list) -> tuple:
    """Strings as one UTF-8 buffer (uint8) + int64 offsets counted in characters, so
    unpacking is one decode and one slice per string, not a decode per string."""
    offs = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, strings), dtype=np.int64, count=len(strings)), out=offs[1:])
    # surrogatepass: a lone surrogate in a document is still a word and must round-trip
    buf = "".join(strings).encode("utf-8", "surrogatepass")
    return np.frombuffer(buf, dtype=np.uint8), offs


def _pack_bytes(strings: list) -> tuple:
    """Strings as one UTF-8 buffer (uint8) + int64 offsets counted in bytes (for C)."""
    parts = [w.encode("utf-8", "surrogatepass") for w in strings]
    offs = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offs[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offs


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


def slot_bits(slots: np.ndarray) -> np.ndarray:
    """The uint64 bitset (bit s of word s // 64, little-endian) of non-negative slots, built
    through a byte mask in O(max slot / 8) rather than one ufunc.at call per slot."""
    if not len(slots):
        return np.zeros(1, dtype=np.uint64)
    mask = np.zeros((int(slots.max()) // 64 + 1) * 64, dtype=bool)
    mask[slots] = True
    return np.packbits(mask, bitorder="little").view(np.uint64)


class TextField:
    """The analyzer, the term dictionary and the inverted index of one hs.Text field."""

    def __init__(self, name: str, analyzer) -> None:
        self.name = name
        self.analyzer = analyzer
        self.vocab: dict = {}   # stem -> term id
        self.tid_of: dict = {}  # word as written (after lowercasing) -> term id
        self.index = K.InvertedIndex()
        self._lex = None        # (tid_of it mirrors, K.Lexicon): the words -> term ids in C
        self._sorted = None     # (key, sorted words, sorted stems) for prefix expansion

    def add(self, slots: np.ndarray, texts: list) -> None:
        """Indexes texts[i] as slots[i] (replacing what the slot held). Tokenising, lowercasing
        and the word -> term id lookups run in C over the whole batch (K.Lexicon); only the
        words this field has never seen come back here, once each, to be stemmed."""
        buf, offs, presplit = self.analyzer.encode_batch(texts)
        self._lexicon().add_to(self.index, np.ascontiguousarray(slots, dtype=np.int64), buf, offs, presplit,
                               self.analyzer.lowercase, self._new_ids)

    def _new_ids(self, words: list) -> list:
        """Term ids of words not seen before (each once): stemmed in one call; a new stem gets
        the next term id. Both dictionaries learn them, so queries and export see them."""
        vocab, tid_of = self.vocab, self.tid_of
        ids = []
        for w, stem in zip(words, self.analyzer.stems(words)):
            t = vocab.get(stem)
            if t is None:
                t = vocab[stem] = len(vocab)
            tid_of[w] = t
            ids.append(t)
        return ids

    def _lexicon(self):
        """The native copy of tid_of, (re)built from it when they differ (a restore replaces
        tid_of; every add grows both by the same words)."""
        lex = self._lex
        if lex is None or lex[0] is not self.tid_of or len(lex[1]) != len(self.tid_of):
            native = K.Lexicon()
            buf, offs = _pack_bytes(list(self.tid_of))
            native.put(buf, offs, np.fromiter(self.tid_of.values(), dtype=np.int32, count=len(self.tid_of)))
            lex = self._lex = (self.tid_of, native)
        return lex[1]

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

    def _sorted_dictionaries(self) -> tuple:
        """(words, stems), each sorted, built on the first prefix query and extended by the words
        and stems added since (the dictionaries only grow, in insertion order; a restore
        replaces them, which the key sees)."""
        key = (id(self.tid_of), len(self.tid_of), id(self.vocab), len(self.vocab))
        cache = self._sorted
        if cache is not None and cache[0] == key:
            return cache[1], cache[2]
        if cache is not None and cache[0][0] == key[0] and cache[0][2] == key[2]:
            # the old lists are sorted runs: Timsort merges the new tail in about linear time
            words = sorted(cache[1] + list(islice(self.tid_of, cache[0][1], None)))
            stems = sorted(cache[2] + list(islice(self.vocab, cache[0][3], None)))
        else:
            words, stems = sorted(self.tid_of), sorted(self.vocab)
        self._sorted = (key, words, stems)  # one assignment: a concurrent reader sees old or new
        return words, stems

    def expand(self, prefix: str) -> Optional[np.ndarray]:
        """Term ids of prefix*, after the field's lowercasing: the term of the prefix itself as a
        word ("battery*" holds "batteries": both are "batteri"), the terms starting with the
        prefix, and the terms a word starting with it was indexed as ("runn*" finds "running",
        whose term is "run"). None when the analyzer does not make the prefix one word."""
        words = self.analyzer.words(prefix)
        if len(words) != 1:
            return None
        p = words[0]
        own = self.vocab.get(self.analyzer.stems([p])[0])
        found = set() if own is None else {own}
        sorted_words, sorted_stems = self._sorted_dictionaries()
        for table, sorted_keys in ((self.tid_of, sorted_words), (self.vocab, sorted_stems)):
            i = bisect_left(sorted_keys, p)
            while i < len(sorted_keys) and sorted_keys[i].startswith(p):
                found.add(table[sorted_keys[i]])
                i += 1
        return np.array(sorted(found), dtype=np.int32)

    def clauses(self, parsed: tuple, operator: str, boost: float, tokens) -> list:
        """The field's native clauses [(kind, occur, term ids, weight)] of a parsed query.

        A "words" clause gives a term clause per term; a phrase of one term is that term; a
        prefix is one "any" clause scoring `boost` (a constant, as Lucene's prefix query). A
        clause that cannot match here (an unknown term, a prefix matching nothing) is dropped,
        and if it was required the field matches nothing (only its exclusions remain). Equal
        clauses are merged, their weights summed (a repeated word counts per occurrence)."""
        merged: dict = {}
        impossible = False
        for c in parsed:
            occur = MUST if (c.occur == SHOULD and operator == "and") else c.occur
            if c.kind == "prefix":
                terms = self.expand(c.text)
                if terms is None:  # not one word here: literal
                    items = [("term", (self.vocab[t],)) if t in self.vocab else None for t in tokens(c.text)]
                else:
                    items = [("any", tuple(terms.tolist())) if len(terms) else None]
            elif c.kind == "phrase":
                toks = tokens(c.text)
                if not toks:
                    continue
                tids = [self.vocab.get(t) for t in toks]
                items = [None if None in tids else ("term" if len(tids) == 1 else "phrase", tuple(tids))]
            else:
                items = [("term", (self.vocab[t],)) if t in self.vocab else None for t in tokens(c.text)]
            for item in items:
                if item is None:
                    impossible |= occur == MUST
                    continue
                key = (item[0], occur, item[1])
                merged[key] = merged.get(key, 0.0) + boost
        return [(kind, occur, np.array(terms, dtype=np.int32), w) for (kind, occur, terms), w in merged.items()
                if not (impossible and occur != MUST_NOT)]

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
    """Every hs.Text field of a schema, kept in step with the collection's slots.

    `threads`: how many text fields a large batch indexes at once (None: one per core). The
    fields share nothing but the analyzer's stem memo, which is thread-safe; each field's
    tokenising and postings release the GIL, so two fields overlap on two cores."""

    def __init__(self, schema: Schema, threads: Optional[int] = None) -> None:
        self.fields = [TextField(spec.name, analyzer_for(spec.analyzer))
                       for spec in schema.fields.values() if spec.kind is Kind.TEXT]
        self.threads = max(1, threads or os.cpu_count() or 1)

    def __bool__(self) -> bool:
        return bool(self.fields)

    def add(self, slots: np.ndarray, columns: dict) -> None:
        """(Re-)indexes the rows at these slots; columns: text field -> list of str or None.
        A large batch indexes its fields in parallel (see the class); an error in one field is
        raised after every field has finished, as the serial loop would leave them."""
        jobs = [(f, columns[f.name]) for f in self.fields]
        workers = min(self.threads, len(jobs))
        if workers < 2 or len(slots) < PARALLEL_MIN_ROWS:
            for f, texts in jobs:
                f.add(slots, texts)
            return
        with ThreadPoolExecutor(workers, thread_name_prefix="hs-text") as pool:
            done = [pool.submit(f.add, slots, texts) for f, texts in jobs]
        for d in done:
            d.result()

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
        snapshot raises ValueError (UnsupportedFormat for an export of another format) and
        leaves this index as it was."""
        if not isinstance(meta, dict):
            raise ValueError("the text index's header is not an object")
        if meta.get("format") != EXPORT_FORMAT:
            raise UnsupportedFormat(f"its text index was written by an unsupported format {meta.get('format')!r}; "
                                    f"this version reads format {EXPORT_FORMAT}")
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

    def _plan(self, text) -> Optional[list]:
        """None for a plain OR of words (the MaxScore path, `_queries`), else [(field, native
        clauses)] for K.query_best_fields: the query's syntax or operator="and" needs it. Each
        field analyses the query with its own analyzer (once per distinct analyzer and text)."""
        raw = text.text if isinstance(text, TextQuery) else text
        operator = text.operator if isinstance(text, TextQuery) else "or"
        parsed = parse_text(raw)
        if operator == "or" and not uses_syntax(parsed):
            return None
        boosts = dict(text.fields) if isinstance(text, TextQuery) and text.fields else None
        cache: dict = {}
        plan = []
        for f in self.fields:
            if boosts is not None and f.name not in boosts:
                continue

            def tokens(t: str, a=f.analyzer) -> list:
                key = (id(a), t)
                if key not in cache:
                    cache[key] = a.tokens(t)
                return cache[key]

            plan.append((f, f.clauses(parsed, operator, boosts[f.name] if boosts else 1.0, tokens)))
        return plan

    def _run(self, plan: list, k, bits):
        return K.query_best_fields([f.index for f, _ in plan], [c for _, c in plan], k, K1, B, bits)

    def scores(self, text: str, slots: np.ndarray, queries: Optional[list] = None) -> np.ndarray:
        """Best-field BM25 of the given slots (0 where the query does not match)."""
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        best = np.zeros(len(slots), dtype=np.float32)
        plan = self._plan(text) if queries is None else None
        if plan is not None:
            valid = slots[slots >= 0]
            if not len(valid):
                return best
            bits = slot_bits(valid)
            got, scores = self._run(plan, None, bits)  # every match among the slots, ascending
            at = np.minimum(np.searchsorted(got, slots), max(len(got) - 1, 0))
            hit = (got[at] == slots) if len(got) else np.zeros(len(slots), dtype=bool)
            best[hit] = scores[at[hit]]
            return best
        for f, terms, weights in queries or self._queries(text):
            if len(terms):
                np.maximum(best, f.index.score(terms, weights, slots, K1, B), out=best)
        return best

    def search(self, text: str, k: int, bits: Optional[np.ndarray]) -> tuple:
        """Exact best-fields top-k -> (slots int64, scores float32), best first, ties to the lower slot."""
        plan = self._plan(text)
        if plan is not None:
            scores, slots, _ = self._run(plan, k, bits)
        else:
            queries = self._queries(text)
            scores, slots = K.search_best_fields([f.index for f, _, _ in queries], [t for _, t, _ in queries],
                                                 [w for _, _, w in queries], k, K1, B, bits)
        n = int(np.count_nonzero(slots >= 0))
        return slots[:n], scores[:n]

    def count(self, text: str, bits: Optional[np.ndarray]) -> int:
        """Documents the query matches (and set in bits): for a plain query, those where a field
        holds a query term."""
        plan = self._plan(text)
        if plan is not None:
            return int(self._run(plan, 0, bits)[2])
        parts = [(f, terms) for f, terms, _ in self._queries(text) if len(terms)]
        if len(parts) == 1:  # one field: the index counts without listing
            return parts[0][0].index.count(parts[0][1], bits)
        return len(self.matches(text, bits))

    def scored_matches(self, text: str, bits: Optional[np.ndarray]) -> tuple:
        """(slots ascending, best-field BM25 float32) of every match, in one native call: what
        matches() and scores() give together, without a second pass over the matches."""
        plan = self._plan(text)
        if plan is None:  # a plain OR: one "should" term clause per query term and field
            plan = [(f, [("term", SHOULD, (int(t),), float(w)) for t, w in zip(terms.tolist(), weights.tolist())])
                    for f, terms, weights in self._queries(text)]
        if not any(c for _, c in plan):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        return self._run(plan, None, bits)

    def matches(self, text: str, bits: Optional[np.ndarray]) -> np.ndarray:
        """Slots the query matches, ascending (plain query: where any field holds any query term)."""
        plan = self._plan(text)
        if plan is not None:
            return self._run(plan, None, bits)[0]
        parts = [f.index.matches(terms, bits) for f, terms, _ in self._queries(text) if len(terms)]
        if not parts:
            return np.empty(0, dtype=np.int64)
        if len(parts) == 1:  # one field's matches are already ascending and unique
            return parts[0]
        return np.flatnonzero(np.unpackbits(slot_bits(np.concatenate(parts)).view(np.uint8),
                                            bitorder="little")).astype(np.int64)
