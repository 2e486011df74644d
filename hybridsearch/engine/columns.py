"""ColumnStore: the columnar layout every embedded storage keeps in RAM.

Rows ("slots") hold one document each, in insertion order. Numeric and bool
fields live in int64/float64 arrays (what the user stored, compared exactly),
keywords as int32 codes into a per-field dictionary, the vector field in one
contiguous float32 block, and the validated documents aside for `res.docs`.
Arrays grow by doubling, so appends are amortised O(1) and never copy the
whole block per batch. Deleted rows are tombstoned in the `live` bitset and
compacted away once they outnumber the live ones.

With `reuse_slots=True` (graph storages, whose node ids are slots) rows never
move: deleted slots go to a free list and are filled by later inserts, and a
per-slot sequence number keeps insertion order for listings. With
`normalize=True` (cosine on a graph) vectors are stored unit-length, so the
graph can use the inner product.
"""
from __future__ import annotations

import heapq
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.batch import Batch
from hybridsearch.document import Kind, Schema
from hybridsearch.engine.exact import vector_aux
from hybridsearch.engine.program import Column, ProgramBuilder, string_predicate
from hybridsearch.query.filters import In, MatchAll, Node

_COLUMN_DTYPES = {Kind.INT: np.int64, Kind.BOOL: np.int64, Kind.FLOAT: np.float64, Kind.KEYWORD: np.int32}
_MIN_CAPACITY = 1024


class ColumnStore:
    """Columns, vectors, ids and documents of one collection, by slot."""

    def __init__(self, schema: Schema, metric: str = "cosine", reuse_slots: bool = False,
                 normalize: bool = False) -> None:
        self.schema = schema
        self.metric = metric
        self.reuse_slots = reuse_slots
        self.normalize = normalize
        self.free: list = []  # heap of reusable slots (reuse_slots only)
        self.seq = np.zeros(0, dtype=np.int64)  # insertion sequence per slot
        self.compactions = 0  # bumped whenever slots are renumbered
        self.next_seq = 0
        self.n = 0  # slots in use (live or tombstoned)
        self.n_live = 0
        self.cap = 0
        self.ids: list = []
        self.docs: list = []
        self.row_of: dict = {}
        self.live = np.zeros(0, dtype=np.uint64)
        self.values: dict = {}
        self.present: dict = {}
        self.kw_dictionary: dict = {}
        self.kw_codes: dict = {}
        for spec in schema.fields.values():
            if spec.kind in _COLUMN_DTYPES:
                self.values[spec.name] = np.zeros(0, dtype=_COLUMN_DTYPES[spec.kind])
            if spec.kind is Kind.KEYWORD:
                self.kw_dictionary[spec.name] = []
                self.kw_codes[spec.name] = {}
            if spec.optional:
                self.present[spec.name] = np.zeros(0, dtype=np.uint8)
        self.vec_spec = schema.vector
        self.dim = schema.vector.dim if schema.vector else 0
        self.vectors = np.zeros((0, max(self.dim, 1)), dtype=np.float32)
        self.aux = np.zeros(0, dtype=np.float32)

    # ------------------------------------------------------------ capacity
    def _grow(self, needed: int) -> None:
        if needed <= self.cap:
            return
        cap = max(_MIN_CAPACITY, self.cap * 2)
        while cap < needed:
            cap *= 2

        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        self.values = {k: grown(v) for k, v in self.values.items()}
        self.present = {k: grown(v) for k, v in self.present.items()}
        self.vectors = grown(self.vectors)
        self.aux = grown(self.aux)
        self.seq = grown(self.seq)
        live = np.zeros(cap // 64 + 1, dtype=np.uint64)
        live[: len(self.live)] = self.live
        self.live = live
        self.cap = cap

    # -------------------------------------------------------------- writes
    def _encode_keywords(self, name: str, strings: np.ndarray, present: Optional[np.ndarray]) -> np.ndarray:
        codes = self.kw_codes[name]
        dictionary = self.kw_dictionary[name]
        out = np.empty(len(strings), dtype=np.int32)
        for i, s in enumerate(strings):
            if s is None or (present is not None and not present[i]):
                out[i] = -1
                continue
            c = codes.get(s)
            if c is None:
                c = codes[s] = len(dictionary)
                dictionary.append(s)
            out[i] = c
        return out

    def _stored_vectors(self, block: np.ndarray) -> np.ndarray:
        if not self.normalize:
            return block
        norms = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float32))
        return (block / np.maximum(norms, 1e-30)[:, None]).astype(np.float32)

    def upsert(self, batch: Batch, slots: Optional[np.ndarray] = None) -> np.ndarray:
        """Writes a batch (ids unique within it); returns the slot of each document.

        Existing ids are overwritten in place (they keep their position); new ids
        take a free slot (reuse_slots) or are appended. `slots` forces the slots
        of new ids (restoring a snapshot). The caller holds the write lock."""
        n = len(batch)
        forced = slots
        slots = np.empty(n, dtype=np.int64)
        new = 0
        reused = []
        for i, id_ in enumerate(batch.ids):
            s = self.row_of.get(id_)
            if s is None:
                if forced is not None:
                    s = int(forced[i])
                    new = max(new, s + 1 - self.n)
                elif self.free:
                    s = heapq.heappop(self.free)
                    reused.append(s)
                else:
                    s = self.n + new
                    new += 1
            slots[i] = s
        # encode before touching any state so a failure leaves nothing half-written
        encoded = {}
        for name, arr in batch.columns.items():
            if name in self.kw_codes:
                arr = self._encode_keywords(name, arr, batch.present.get(name))
            encoded[name] = arr
        vectors = self._stored_vectors(batch.vectors) if batch.vectors is not None else None
        aux = vector_aux(vectors, self.metric) if vectors is not None else None

        self._grow(self.n + new)
        for name, arr in encoded.items():
            self.values[name][slots] = arr
        for name, arr in batch.present.items():
            self.present[name][slots] = arr
        if vectors is not None:
            self.vectors[slots] = vectors
            self.aux[slots] = aux
        self.ids.extend([None] * new)
        self.docs.extend([None] * new)
        fresh = []
        for i, s in enumerate(slots.tolist()):
            if self.ids[s] is None:
                fresh.append(s)
            self.ids[s] = batch.ids[i]
            self.docs[s] = batch.docs[i]
            self.row_of[batch.ids[i]] = s
        self.n += new
        self.n_live += len(fresh)
        if fresh:
            arr = np.array(fresh, dtype=np.int64)
            self.seq[arr] = np.arange(self.next_seq, self.next_seq + len(arr))
            self.next_seq += len(arr)
            np.bitwise_or.at(self.live, arr >> 6, np.left_shift(np.uint64(1), (arr & 63).astype(np.uint64)))
        return slots

    def delete(self, ids: list) -> int:
        """Tombstones the rows of the given ids (unknown ids are ignored); returns how many."""
        slots = [self.row_of.pop(i) for i in ids if i in self.row_of]
        if not slots:
            return 0
        arr = np.array(slots, dtype=np.int64)
        mask = np.left_shift(np.uint64(1), (arr & 63).astype(np.uint64))
        np.bitwise_and.at(self.live, arr >> 6, ~mask)
        for s in slots:
            self.ids[s] = None
            self.docs[s] = None
        self.n_live -= len(slots)
        if self.reuse_slots:
            for s in slots:
                heapq.heappush(self.free, s)
        elif self.n - self.n_live > max(_MIN_CAPACITY, self.n_live):
            self.compact()
        return len(slots)

    def set_fields(self, slot: int, values: dict, doc) -> None:
        """Partial update of one row: only the named columns are written."""
        for name, value in values.items():
            spec = self.schema.fields[name]
            if name in self.present:
                self.present[name][slot] = value is not None
            if spec.kind is Kind.VECTOR:
                block = np.zeros((1, self.dim), dtype=np.float32)
                if value is not None:
                    block[0] = value
                block = self._stored_vectors(block)
                self.vectors[slot] = block[0]
                self.aux[slot] = vector_aux(block, self.metric)[0]
            elif name in self.values:
                if spec.kind is Kind.KEYWORD:
                    arr = np.array([value], dtype=object)
                    self.values[name][slot] = self._encode_keywords(name, arr, None)[0]
                elif value is not None:
                    self.values[name][slot] = value
        self.docs[slot] = doc

    def compact(self) -> None:
        """Drops tombstoned rows, keeping insertion order."""
        self.compactions += 1
        keep = self.live_rows()
        m = len(keep)
        for name in self.values:
            self.values[name][:m] = self.values[name][keep]
        for name in self.present:
            self.present[name][:m] = self.present[name][keep]
        self.vectors[:m] = self.vectors[keep]
        self.aux[:m] = self.aux[keep]
        self.seq[:m] = self.seq[keep]
        self.ids = [self.ids[s] for s in keep.tolist()]
        self.docs = [self.docs[s] for s in keep.tolist()]
        self.row_of = {id_: s for s, id_ in enumerate(self.ids)}
        self.live[:] = 0
        full, rest = divmod(m, 64)
        self.live[:full] = np.uint64(0xFFFFFFFFFFFFFFFF)
        if rest:
            self.live[full] = np.uint64((1 << rest) - 1)
        self.n = m

    # --------------------------------------------------------------- reads
    def live_bits(self) -> np.ndarray:
        return self.live[: (self.n + 63) // 64]

    def live_rows(self) -> np.ndarray:
        return K.bitset_to_indices(self.live_bits(), self.n)

    def in_order(self, rows: np.ndarray) -> np.ndarray:
        """Rows sorted by insertion order (slot order already is, unless slots are reused)."""
        if not self.reuse_slots or len(rows) < 2:
            return rows
        return rows[np.argsort(self.seq[rows], kind="stable")]

    def rows_in_order(self, bits: np.ndarray, limit: Optional[int]) -> list:
        """Slots set in `bits`, in insertion order, at most `limit`."""
        if not self.reuse_slots:
            return K.bitset_to_indices(bits, self.n if limit is None else limit).tolist()
        rows = self.in_order(K.bitset_to_indices(bits, self.n))
        return rows[:limit].tolist() if limit is not None else rows.tolist()

    def column(self, name: str) -> Column:
        spec = self.schema.fields[name]
        return Column(
            kind=spec.kind,
            values=self.values.get(name),
            present=self.present.get(name),
            dictionary=self.kw_dictionary.get(name),
            codes=self.kw_codes.get(name),
        )

    def _id_bits(self, node: Node) -> np.ndarray:
        bits = np.zeros(max((self.n + 63) // 64, 1), dtype=np.uint64)
        if isinstance(node, In):
            rows = [self.row_of[v] for v in node.values if v in self.row_of]
        elif node.op == "$eq":
            rows = [self.row_of[node.value]] if node.value in self.row_of else []
        else:  # string range over ids: rare, one pass over the ids
            pred = string_predicate(node.op, node.value)
            rows = [s for id_, s in self.row_of.items() if pred(id_)]
        if rows:
            arr = np.array(rows, dtype=np.int64)
            np.bitwise_or.at(bits, arr >> 6, np.left_shift(np.uint64(1), (arr & 63).astype(np.uint64)))
        return bits

    def _program(self, node: Node) -> list:
        return ProgramBuilder(K, self.column, self._id_bits).build(node)

    def filter_bits(self, node: Node) -> np.ndarray:
        """Bitset of the live rows matching a parsed filter (one native call)."""
        return K.filter_eval(self._program(node), self.n, self.live_bits())

    def vector_bits(self, node: Optional[Node]) -> Optional[np.ndarray]:
        """Rows a vector search may return: live, with a vector, matching the filter.
        None means every slot (the fast path: no deletes, no filter)."""
        optional_vec = self.vec_spec is not None and self.vec_spec.optional
        if node is None and not optional_vec and self.n_live == self.n:
            return None
        program = self._program(node if node is not None else MatchAll())
        if optional_vec:
            program.append((K.F_PRESENT, 0, 0, None, self.present[self.vec_spec.name], 0, 0.0, None, None))
            program.append((K.F_AND, 0, 2, None, None, 0, 0.0, None, None))
        return K.filter_eval(program, self.n, self.live_bits())

    def vector_block(self) -> np.ndarray:
        return self.vectors[: self.n]

    def aux_block(self) -> Optional[np.ndarray]:
        return None if self.metric == "ip" else self.aux[: self.n]

    # ------------------------------------------------------------ search
    def exact_search(self, queries: np.ndarray, limit: int, bits: Optional[np.ndarray]) -> tuple:
        """(scores, rows) of the exact top-`limit` of each query row among the rows set in
        `bits` (None: every live row with a vector); one native call for the whole batch."""
        if bits is None:
            bits = self.vector_bits(None)
        return K.exact_search(self.vector_block(), self.n, self.aux_block(), queries, self.metric, bits, limit)

    def hits(self, rows: np.ndarray, scores: np.ndarray) -> list:
        """(ids, scores, docs) per row of an (nq, k) search result, -1 padding dropped."""
        return K.hits_of_rows(np.ascontiguousarray(rows, dtype=np.int64),
                              np.ascontiguousarray(scores, dtype=np.float32), self.ids, self.docs)

    def vector_scores(self, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The user-facing similarity (API.md) of query q to the given rows, exact, in float64."""
        if len(rows) == 0:
            return np.empty(0, dtype=np.float64)
        X = np.ascontiguousarray(self.vectors[rows])
        raw = K.scores_rows(X, np.ascontiguousarray(q, dtype=np.float32), self.metric).astype(np.float64)
        if self.metric == "ip":
            return raw
        if self.metric == "l2":
            return -np.sqrt(np.maximum(raw, 0.0))
        qn = float(np.linalg.norm(q))
        return raw * self.aux[rows] / qn if qn > 0 else np.zeros(len(rows))


def popcount(bits: np.ndarray) -> int:
    """How many rows a bitset selects."""
    return int(K.popcount(bits))
