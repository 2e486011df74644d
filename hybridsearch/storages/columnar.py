"""The reads every ColumnStore-based storage answers the same way."""
from __future__ import annotations

from typing import Iterator, Optional

import numpy as np

from hybridsearch.document import Kind
from hybridsearch.engine import facets as F
from hybridsearch.engine.columns import popcount
from hybridsearch.engine.find import vector_hits
from hybridsearch.errors import UnsupportedError
from hybridsearch.query.filters import Node
from hybridsearch.query.candidates import Candidates
from hybridsearch.storages.base import Storage


class ColumnarStorage(Storage):
    """A Storage whose documents live in `self.store` (a ColumnStore) under `self.lock` (an RWLock).

    Subclasses own the writes and the vector search; counting, lookups, listing
    and filter-only search read the columns directly, in insertion order."""

    store = None
    lock = None
    text = None  # a lexical.TextIndex where the storage keeps one
    # why find(text=...) is refused when the storage keeps no TextIndex at all (UnsupportedError)
    no_text_reason = "this storage keeps no lexical index"
    # "syntax": phrases, +/-, prefix* (query/text.py); "operator": operator="and"
    query_options = frozenset({"linear", "text_fields", "syntax", "operator"})

    def count(self) -> int:
        return self.store.n_live

    def contains(self, id: str) -> bool:
        return id in self.store.row_of

    def get(self, ids: list) -> list:
        """The documents of these ids (None where absent), built from the columns."""
        with self.lock.read():
            slots = self.store.slots_of(ids)
            have = np.flatnonzero(slots >= 0)
            out = [None] * len(ids)
            for i, doc in zip(have.tolist(), self.store.documents(slots[have])):
                out[i] = doc
            return out

    def iter_ids(self) -> Iterator[str]:
        with self.lock.read():
            st = self.store
            ids = st.ids.get_many(st.rows_in_order(st.live_bits(), None))
        return iter(ids)

    def stats(self) -> dict:
        """Adds "bytes": what the collection holds in RAM per component (allocated capacity):
        vectors (with their norms), ids (strings and the id map), strings (text and unindexed
        fields), columns (numbers, bools, keyword codes, presence, order, liveness), keywords
        (their dictionaries, estimated) and postings (the inverted index)."""
        with self.lock.read():
            sizes = self.store.nbytes()
            if self.text:
                sizes["postings"] = int(self.text.nbytes)
        return {**super().stats(), "bytes": sizes}

    def column_values(self, names: list) -> dict:
        """Straight from the columns: numbers, bools and vectors of a field that allows no None
        as numpy copies, the rest as per-row values."""
        with self.lock.read():
            st = self.store
            rows = np.asarray(st.rows_in_order(st.live_bits(), None), dtype=np.int64)
            out = {}
            for name in names:
                spec = self.schema.fields[name]
                if spec.optional:
                    continue
                if spec.kind is Kind.VECTOR:
                    out[name] = st.dense[name].vectors[rows]
                elif spec.kind in (Kind.INT, Kind.FLOAT):
                    out[name] = st.values[name][rows]
                elif spec.kind is Kind.BOOL:
                    out[name] = st.values[name][rows].astype(bool)
            rest = [n for n in names if n not in out]
            values = st.field_values(rows, rest) if rest else {}
            return {name: out[name] if name in out else values[name] for name in names}

    def count_matches(self, node: Optional[Node], text: Optional[str]) -> int:
        """A popcount of the filter's bitset; with text, the inverted index counts the matches
        among those rows (no hit is ranked or fetched)."""
        with self.lock.read():
            st = self.store
            bits = st.filter_bits(node) if node is not None else None
            if text is None:
                return popcount(bits) if bits is not None else st.n_live
            if not self.text:
                raise self._no_text()
            return self.text.count(text, bits)

    def _matching_rows(self, node: Optional[Node], text: Optional[str]) -> np.ndarray:
        """Rows matching the filter (None: all live) and holding a query term of `text`; the
        caller holds the read lock."""
        st = self.store
        if text is None:
            return st.slots_matching(node) if node is not None else st.live_rows()
        if not self.text:
            raise self._no_text()
        return self.text.matches(text, st.filter_bits(node) if node is not None else None)

    def facets(self, field: str, node: Optional[Node], text: Optional[str], limit: int,
               ranges: Optional[list]) -> list:
        with self.lock.read():
            rows = self._matching_rows(node, text)
            if ranges is not None:
                return F.range_counts(self.store, field, rows, ranges)
            return F.value_counts(self.store, field, rows, limit)

    def search_sorted(self, node: Optional[Node], text: Optional[str], keys: list,
                      limit: Optional[int]) -> tuple:
        """Every match ordered by the sort keys, the first `limit` -> (ids, scores, docs, total);
        with text, ties go to the higher BM25 (the hit scores), then to insertion order."""
        with self.lock.read():
            st = self.store
            rows = np.asarray(self._matching_rows(node, text), dtype=np.int64)
            scores = self.text.scores(text, rows) if text is not None else np.zeros(len(rows), np.float32)
            order = F.sort_order(st, rows, keys, -scores if text is not None else None, limit)
            return st.ids.get_many(rows[order]), scores[order], None, len(rows)

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        with self.lock.read():
            st = self.store
            rows = st.rows_in_order(st.filter_bits(node), None if limit is None else min(limit, st.n_live))
            return st.ids.get_many(rows), None

    # ------------------------------------------------------ writes by condition
    # The matching rows are chosen and written under one hold of the writer lock: a reader sees
    # every matching document changed or none. Storages with files override these with their one
    # durable write (JournaledStorage: one log record; sqlite: one transaction).
    def delete_where(self, node: Node) -> int:
        with self.lock.write():
            st = self.store
            ids = st.ids.get_many(st.slots_matching(node))
            return self._apply_delete(ids) if ids else 0

    def update_where(self, node: Node, values: dict) -> int:
        """Every matching slot takes the values at once (ColumnStore.set_fields: one vectorised
        store per column)."""
        with self.lock.write():
            slots = self.store.slots_matching(node)
            if len(slots) and values:
                self._apply_update(slots, values)
            return len(slots)

    def _apply_delete(self, ids: list) -> int:
        """Deletes the ids that exist, returns how many; the caller holds the write lock."""
        raise NotImplementedError

    def _apply_update(self, slots, values: dict) -> None:
        """Sets the same values on one slot or an array of them; the caller holds the write lock."""
        raise NotImplementedError

    # -------------------------------------------------------------- hits
    def _hits(self, rows, scores) -> tuple:
        """(ids, scores, docs) of one result row (slots padded with -1 at the end)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(1, -1)
        return self._hits_of_rows(rows, np.asarray(scores, dtype=np.float32)[: rows.shape[1]].reshape(1, -1))[0]

    def _prefilter_bits(self, node: Optional[Node], vectors: bool,
                        field: Optional[str] = None) -> Optional[np.ndarray]:
        """The rows a filtered search may return, as a bitset (None: every row). `vectors`:
        only rows that have a vector in dense field `field` (None: the one), for vector search.
        The caller holds the read lock."""
        st = self.store
        if vectors:
            return st.vector_bits(node, field)
        return st.filter_bits(node) if node is not None else None

    def _vectors(self, queries, limit, node, exact, ef, field=None) -> tuple:
        """(scores, rows) of a vector search of dense field `field` (None: the schema's one);
        the caller holds the read lock."""
        raise UnsupportedError(f"storage {self.name!r} has no vector search")

    def _field_search(self, queries, limit, node, exact, ef, field=None) -> tuple:
        """(scores, rows) of a search of any vector field: a sparse or multi-vector field through
        its column (engine/fieldvectors.py: exact, filter as pre-filter), a dense one through
        _vectors. The caller holds the read lock."""
        col = self.store.fieldvecs.get(field) if field is not None else None
        if col is None:
            return self._vectors(queries, limit, node, exact, ef, field)
        return self._fieldvec_search(col, queries, limit, node, exact, ef)

    def _fieldvec_search(self, col, queries, limit, node, exact, ef) -> tuple:
        """Exact top-`limit` of a sparse or multi-vector field (storages with an index for one
        override this). The caller holds the read lock."""
        return col.search(queries, limit, self._prefilter_bits(node, False))

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef, field: Optional[str] = None) -> list:
        with self.lock.read():
            limit = min(limit, self.store.n_live)  # nothing is allocated beyond what can be returned
            if limit == 0:
                return [([], np.empty(0, dtype=np.float32), None) for _ in range(len(queries))]
            scores, rows = self._field_search(queries, limit, node, exact, ef, field)
            return self._hits_of_rows(rows, scores)

    def find_vector(self, query, limit: int, ef: Optional[int], exact: bool) -> Optional[tuple]:
        """The plain vector find in one native call (engine/find.py) under the read lock ->
        (ids, scores), or None for the general path (a query the native check does not take, or a
        collection whose rows may lack a vector, which the general path leaves out)."""
        spec = self.store.vec_spec
        if spec is None or spec.optional:
            return None
        lock = self.lock
        lock.acquire_read()
        try:
            return self._find_natively(query, min(limit, self.store.n_live), ef, exact)
        finally:
            lock.release_read()

    def _find_natively(self, query, k: int, ef: Optional[int], exact: bool) -> Optional[tuple]:
        """(ids, scores) of the exact scan of every live row (storages with an index walk it
        instead), or None; the caller holds the read lock."""
        hits = vector_hits(query, self.store, k)
        return None if hits is None else hits[:2]

    def _hits_of_rows(self, rows: np.ndarray, scores: np.ndarray) -> list:
        """(ids, scores, None) per row of a (nq, k) search result: the documents are built when
        read, by id (`get`). The caller holds the read lock."""
        return [(ids, s, None) for ids, s in self.store.hits(rows, scores)]

    def _slot_to_update(self, id: str, values: dict) -> Optional[int]:
        """The slot a partial update writes; None when there is nothing to write, KeyError
        when the id is absent. The caller holds the write lock."""
        slot = self.store.row_of.get(id)
        if slot is None:
            raise KeyError(id)
        return slot if values else None

    def _updated_doc(self, slot: int, values: dict):
        """The document at `slot` with `values` applied (for storages that log or write whole rows)."""
        return self.store.documents([slot])[0].model_copy(update=values)

    # -------------------------------------------------------------- text
    def _no_text(self) -> UnsupportedError:
        return UnsupportedError(
            f"storage {self.name!r} has no text search here: the schema has no hs.Text field"
            if self.text is not None else f"text search is not available on storage {self.name!r}: "
                                          f"{self.no_text_reason}")

    # ------------------------------------------ retrieval primitives (storages/base.py)
    # keys are slots; query/executor.py calls these inside reading(), which holds the read lock
    def reading(self):
        return self.lock.read()

    def no_text_search(self) -> UnsupportedError:
        return self._no_text()

    def _candidates(self, rows: np.ndarray, scores: np.ndarray) -> Candidates:
        """Slots and their scores as Candidates, with their insertion order (ties)."""
        rows = np.asarray(rows, dtype=np.int64)
        return Candidates(rows, np.asarray(scores, dtype=np.float32), self.store.seq[rows])

    def vector_top(self, query: np.ndarray, k: int, node: Optional[Node], exact: bool, ef,
                   field: Optional[str] = None) -> Candidates:
        k = min(k, self.store.n_live)
        if k == 0:
            return Candidates.empty()
        scores, rows = self._field_search(query, k, node, exact, ef, field)
        rows, scores = rows[0], scores[0]
        found = int(np.count_nonzero(rows >= 0))  # hits first, -1 padding after them
        return self._candidates(rows[:found], scores[:found])

    def text_top(self, text, k: int, node: Optional[Node]) -> Candidates:
        """The native exact top-k (ties to the lower slot: insertion order unless slots are reused)."""
        if not self.text:
            raise self._no_text()
        k = min(k, self.store.n_live)
        if k == 0:
            return Candidates.empty()
        return self._candidates(*self.text.search(text, k, self._prefilter_bits(node, False)))

    def text_matches(self, text, node: Optional[Node]) -> Candidates:
        """Every match with its BM25 in one native call, slots ascending."""
        if not self.text:
            raise self._no_text()
        return self._candidates(*self.text.scored_matches(text, self._prefilter_bits(node, False)))

    def scores_of(self, keys: np.ndarray, part: str, query, field: Optional[str] = None) -> np.ndarray:
        """Exact part scores of the keys (slots); on a dense field, NaN where the document holds
        no vector there (the executor fuses that as 0: API.md section 10)."""
        if part == "text":
            if not self.text:
                raise self._no_text()
            return self.text.scores(query, keys)
        st = self.store
        if field is not None and field in st.fieldvecs:  # NaN where the document holds no value
            return st.fieldvecs[field].scores(query[0], keys)
        scores = st.vector_scores(query[0], keys, field).astype(np.float32)
        has = st.has_vector(keys, field) if len(keys) else None
        if has is not None:
            scores[~has] = np.nan
        return scores

    def hits_of(self, keys: np.ndarray, docs: Optional[list] = None) -> tuple:
        return self.store.ids.get_many(keys), None  # documents are built from the columns when read
