"""storage="hnswlib": the DocumentArray API over the hnswlib library (the benchmark anchor).

Columns, documents and raw vectors live in a ColumnStore with slot reuse, so a
slot never moves and the hnswlib label of a document *is* its slot. The index
holds exactly the live documents that have a vector: a deleted document's label
is `mark_deleted`, a document without a vector is never added (or is marked
deleted when its vector is removed). A freed slot handed to a new document is
re-added under the same label; hnswlib 0.8 then unmarks the label and moves the
point (`addPoint` on an existing label -> `unmarkDeletedInternal` + `updatePoint`).

Searches: unfiltered -> `knn_query` (deleted labels are skipped by hnswlib);
filtered -> `knn_query(filter=...)` with a Python callable over the filter's
bitset, as a user of hnswlib would write it. Whenever hnswlib cannot return
min(limit, matches) hits it raises, and that query is answered exactly instead,
so a filtered search still returns min(limit, matches) hits, all matching.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Optional

import hnswlib
import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.engine.columns import ColumnStore, popcount
from hybridsearch.engine.rwlock import RWLock
from hybridsearch.query.filters import Node
from hybridsearch.storages.columnar import ColumnarStorage
from hybridsearch.storages.config import GraphConfig, integer, option

_SPACES = {"cosine": "cosine", "ip": "ip", "l2": "l2"}
_INITIAL_CAPACITY = 1024


@dataclasses.dataclass(frozen=True)
class HnswlibConfig(GraphConfig):
    """Options of storage="hnswlib" (m >= 2: m=1 makes hnswlib's level multiplier 1/ln(1))."""

    threads: Optional[int] = option(None, integer(1, allow_none=True), "insert / query threads; None = every core")


class HnswlibStorage(ColumnarStorage):
    """A ColumnStore for documents and filters plus one hnswlib index over the vectors."""

    name = "hnswlib"
    Config = HnswlibConfig
    no_text_reason = ("hnswlib has no lexical index, it searches vectors only (use memory, hnsw or "
                      "sqlite for text and hybrid search)")

    def __init__(self, schema, config: HnswlibConfig) -> None:
        super().__init__(schema, config)
        self.ef = config.ef
        self.threads = config.threads or os.cpu_count() or 1
        self.store = ColumnStore(schema, self.metric, reuse_slots=True)
        self.lock = RWLock()
        self.vec_name = schema.vector.name if schema.vector else None
        self.vec_optional = bool(schema.vector and schema.vector.optional)
        self.index = None
        # per slot: label ever added to the index / label added and not marked deleted
        self.in_index = np.zeros(0, dtype=bool)
        self.indexed = np.zeros(0, dtype=bool)
        self.n_indexed = 0
        if schema.vector is not None:
            self.index = hnswlib.Index(space=_SPACES[self.metric], dim=schema.vector.dim)
            self.index.init_index(max_elements=_INITIAL_CAPACITY, M=config.m,
                                  ef_construction=config.ef_construct)
            self.index.set_ef(self.ef)

    # -------------------------------------------------------------- index
    def _track(self, n: int) -> None:
        """Grows the per-slot flags to cover n slots."""
        if n > len(self.indexed):
            cap = max(_INITIAL_CAPACITY, 2 * len(self.indexed), n)
            for name in ("in_index", "indexed"):
                old = getattr(self, name)
                new = np.zeros(cap, dtype=bool)
                new[: len(old)] = old
                setattr(self, name, new)

    def _add(self, vectors: np.ndarray, slots: np.ndarray) -> None:
        """Adds (or re-adds: new vector, unmarked) labels; grows the index by doubling first."""
        if len(slots) == 0:
            return
        new = int(np.count_nonzero(~self.in_index[slots]))
        needed = self.index.element_count + new
        cap = self.index.get_max_elements()
        if needed > cap:
            while cap < needed:
                cap *= 2
            self.index.resize_index(cap)
        self.index.add_items(np.ascontiguousarray(vectors, dtype=np.float32), slots.astype(np.uint64),
                             num_threads=self.threads)
        self.n_indexed += int(np.count_nonzero(~self.indexed[slots]))
        self.in_index[slots] = True
        self.indexed[slots] = True

    def _drop(self, slots) -> None:
        """Marks the labels of these slots deleted where they are in the index."""
        for s in slots:
            if self.indexed[s]:
                self.index.mark_deleted(int(s))
                self.indexed[s] = False
                self.n_indexed -= 1

    # ------------------------------------------------------------- writes
    def upsert(self, batch: Batch) -> None:
        with self.lock.write():
            st = self.store
            if self.index is None:
                st.upsert(batch)
                return
            n = len(batch)
            has_vec = (batch.present[self.vec_name].astype(bool) if self.vec_optional
                       else np.ones(n, dtype=bool))
            # an existing document whose vector did not change keeps its point as it is
            unchanged = np.zeros(n, dtype=bool)
            old = st.slots_of(batch.ids)
            self._track(st.n)
            cand = np.flatnonzero((old >= 0) & has_vec)
            if len(cand):
                cand = cand[self.indexed[old[cand]]]
                same = (st.vectors[old[cand]] == batch.vectors[cand]).all(axis=1)
                unchanged[cand[same]] = True
            slots = st.upsert(batch)
            self._track(st.n)
            add = has_vec & ~unchanged
            self._add(batch.vectors[add], slots[add])
            self._drop(slots[~has_vec].tolist())

    def delete(self, ids: list) -> int:
        with self.lock.write():
            return self._apply_delete(ids)

    def update_fields(self, id: str, values: dict) -> None:
        with self.lock.write():
            slot = self._slot_to_update(id, values)
            if slot is not None:
                self._apply_update(slot, values)

    # delete_where / update_where (ColumnarStorage) call these under the write lock
    def _apply_delete(self, ids: list) -> int:
        slots = self.store.delete(ids)
        if self.index is not None:
            self._drop(slots.tolist())
        return len(slots)

    def _apply_update(self, slots, values: dict) -> None:
        """The same values on one slot or an array of them, one store per column; only the
        points whose vector changes touch the index."""
        st = self.store
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        moved = self._vector_changes(slots, values)
        st.set_fields(slots, values)
        if len(moved) and values[self.vec_name] is None:
            self._drop(moved.tolist())
        elif len(moved):
            self._add(st.vectors[moved], moved)

    def _vector_changes(self, slots: np.ndarray, values: dict) -> np.ndarray:
        """The slots whose point an update moves or removes (none unless it sets the vector)."""
        if self.index is None or self.vec_name not in values:
            return slots[:0]
        v = values[self.vec_name]
        if v is None:
            return slots
        # an indexed point already at this vector keeps its place in the graph
        same = self.indexed[slots] & (self.store.vectors[slots] == np.asarray(v, dtype=np.float32)).all(axis=1)
        return slots[~same]

    # -------------------------------------------------------------- reads
    def _find_natively(self, query, k: int, ef: Optional[int], exact: bool) -> Optional[tuple]:
        """Only exact=True takes the native scan; an approximate find is hnswlib's own walk
        (search_vectors), so find() and find_batched() give the same answers."""
        return super()._find_natively(query, k, ef, exact) if exact else None

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        limit = min(limit, self.store.n_live)  # nothing is allocated beyond what can be returned
        if ef is not None:
            ef = min(ef, max(self.n_indexed, limit, 1))
        if ef is None or ef == self.ef or exact:
            with self.lock.read():
                return self._search(queries, limit, node, exact)
        # the index has one ef: a search with its own ef runs alone and restores it
        with self.lock.write():
            self.index.set_ef(ef)
            try:
                return self._search(queries, limit, node, exact)
            finally:
                self.index.set_ef(self.ef)

    def _search(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool) -> list:
        st = self.store
        nq = len(queries)
        if limit == 0 or self.n_indexed == 0:
            return [([], np.zeros(0, dtype=np.float32), []) for _ in range(nq)]
        if exact:
            return self._exact(queries, st.vector_bits(node), limit)
        if node is None:
            # the index holds exactly the live documents with a vector
            return self._ann(queries, min(limit, self.n_indexed), None, None)
        bits = st.vector_bits(node)
        matches = popcount(bits)
        if matches == 0:
            return [([], np.zeros(0, dtype=np.float32), []) for _ in range(nq)]
        if matches <= limit:  # every match is a hit: only their order is left to find
            return self._exact(queries, bits, limit)
        flags = np.unpackbits(bits.view(np.uint8), bitorder="little")[: st.n].tobytes()
        return self._ann(queries, limit, flags, bits)

    def _exact(self, queries: np.ndarray, bits: Optional[np.ndarray], limit: int) -> list:
        scores, rows = self.store.exact_search(queries, limit, bits)
        return self._hits_of_rows(rows, scores)

    def _scores(self, dists: np.ndarray) -> np.ndarray:
        # hnswlib: cosine -> 1 - cos, ip -> 1 - dot, l2 -> squared distance
        if self.metric == "l2":
            return -np.sqrt(np.maximum(dists, 0)).astype(np.float32)
        return (1.0 - dists).astype(np.float32)

    def _ann(self, queries: np.ndarray, k: int, flags: Optional[bytes], bits: Optional[np.ndarray]) -> list:
        kwargs = {"num_threads": 1}  # find_batched already spreads queries over threads
        if flags is not None:
            kwargs["filter"] = flags.__getitem__
        try:
            labels, dists = self.index.knn_query(queries, k=k, **kwargs)
        except RuntimeError:
            # hnswlib found fewer than k for some query: answer each query on its own,
            # exactly where hnswlib cannot
            if len(queries) > 1:
                return [r for i in range(len(queries)) for r in self._ann(queries[i:i + 1], k, flags, bits)]
            return self._exact(queries, bits if bits is not None else self.store.vector_bits(None), k)
        return self._hits_of_rows(labels.astype(np.int64), self._scores(dists))

    def stats(self) -> dict:
        """Adds hnswlib's side: labels in its index (deleted ones are reused) and the
        documents searchable through it; "index_capacity", the elements the index has room
        for before it is resized (doubled), and "index_ef", the ef the index holds now (a
        find with its own ef sets it for that search alone and puts the option's back)."""
        base = super().stats()  # takes the read lock itself (not nested: a waiting writer would block it)
        with self.lock.read():
            index = self.index
            return {**base, "index_elements": int(index.element_count) if index is not None else 0,
                    "indexed": int(self.n_indexed),
                    "index_capacity": int(index.get_max_elements()) if index is not None else 0,
                    "index_ef": int(index.ef) if index is not None else None}

    def close(self) -> None:
        self.index = None
