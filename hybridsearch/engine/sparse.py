"""Sparse vectors (API.md section 10, `hs.SparseVector`): the value check and the native index.

A sparse vector is a set of keys (ints in [0, 2**31)) with weights (finite, > 0); its score
against a query is the dot product, the sum over the shared keys of query weight x document
weight. `SparseIndex` holds one sparse field of a collection over its document slots:

- writes are CSR batches (one native call for many documents), visible to the next search;
- `top_k` is exact (equal to exhaustive evaluation, ties to the lower slot) but reads far
  fewer postings than that: kernels/hs_sparse.c keeps the largest weight of every block of
  64 postings and skips, per window of slots, the windows and the query keys whose bounds
  cannot lift a document into the top-k (block-max MaxScore);
- a filter is a bitset over slots (uint64 words, as `ColumnStore.vector_bits` makes), applied
  before ranking: the hits are the best among the allowed slots;
- `to_bytes` / `from_bytes` snapshot the documents (a checksummed CSR); the reader checks
  everything and rebuilds the postings, so a damaged snapshot is `BackendError`, never a crash.

Writes are not thread-safe: the collection's reader-writer lock serialises them against each
other and against searches, which may run at once.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.errors import BackendError, ConfigError, SchemaError

# the value rules live with the schema (document.py checks values without the compiled core)
from hybridsearch.vector_rules import MAX_ENTRIES, MAX_KEY, check_sparse  # noqa: F401  (re-exported)

_MAGIC = b"HSSPARS1"
_HEAD = struct.Struct("<8sQQ")  # magic, documents, postings
_CRC = struct.Struct("<I")


def _int_array(a, dtype, name: str, lo: int, hi: int) -> np.ndarray:
    """a as a contiguous 1-d array of dtype, every entry in [lo, hi); SchemaError otherwise."""
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise SchemaError(f"{name} must be 1-d, not of shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise SchemaError(f"{name} must be ints, not {arr.dtype}")
    if arr.size and (int(arr.min()) < lo or int(arr.max()) >= hi):
        raise SchemaError(f"{name} has an entry outside [{lo}, {hi})")
    return np.ascontiguousarray(arr, dtype=dtype)


def _bits(bits) -> Optional[np.ndarray]:
    if bits is None:
        return None
    if not isinstance(bits, np.ndarray) or bits.dtype != np.uint64 or bits.ndim != 1:
        raise ConfigError("a filter bitset must be a 1-d uint64 array (64 slots per word)")
    return np.ascontiguousarray(bits)


def _query(indices, values) -> tuple:
    """The query's arrays for the native calls (checked there: keys ascending, weights > 0)."""
    return (_int_array(indices, np.int32, "query indices", 0, MAX_KEY),
            np.ascontiguousarray(np.asarray(values), dtype=np.float32))


def _native_query_error(e: ValueError) -> SchemaError:
    return SchemaError(f"sparse query: {e} (check_sparse gives that form)")


class SparseIndex:
    """One sparse-vector field's inverted index over document slots (ints in [0, 2**31 - 1))."""

    def __init__(self) -> None:
        self._ix = K.SparsePostings()

    # ------------------------------------------------------------ writes
    def add(self, slots, indptr, indices, values) -> None:
        """Indexes a CSR batch in one native call: slot slots[i] gets the entries
        indices[indptr[i]:indptr[i+1]] (strictly ascending keys in [0, 2**31)) weighted by
        values[...] (float32, finite, > 0), replacing what it held; no entries removes it; a
        slot given twice keeps its last document. The whole batch is checked first: SchemaError
        and nothing changes."""
        slots = _int_array(slots, np.int64, "slots", 0, 2**31 - 1)
        indptr = _int_array(indptr, np.int64, "indptr", 0, 2**63 - 1)
        indices = _int_array(indices, np.int32, "indices", 0, MAX_KEY)
        values = np.asarray(values)
        if values.ndim != 1 or (values.size and values.dtype.kind != "f"):
            raise SchemaError(f"values must be a 1-d float array, not {values.dtype} of shape {values.shape}")
        values32 = np.ascontiguousarray(values, dtype=np.float32)
        if values.size and not np.array_equal(values32, values, equal_nan=True):
            raise SchemaError("values must be float32 numbers (check_sparse makes them)")
        try:
            self._ix.add(slots, indptr, indices, values32)
        except ValueError as e:
            raise SchemaError(f"sparse batch: {e}") from None

    def remove(self, slots) -> None:
        """Drops these slots' documents (slots not indexed are ignored)."""
        self._ix.remove(_int_array(slots, np.int64, "slots", -(2**63), 2**63 - 1))

    # ------------------------------------------------------------ reads
    def top_k(self, q_indices, q_values, k: int, bits=None, prune: bool = True) -> tuple:
        """Exact top-k of one query -> (scores float32, slots int64), best first, at most k: the
        documents sharing at least one key with the query and set in `bits` (None: every slot;
        slots past the bitset are not allowed), by dot product, ties to the lower slot.
        prune=False reads every posting of the query's keys (the same answer, for comparison)."""
        if k < 0:
            raise ConfigError(f"k must be >= 0, not {k}")
        qi, qv = _query(q_indices, q_values)
        try:
            scores, slots, _ = self._ix.search(qi, qv, int(k), _bits(bits), prune)
        except ValueError as e:
            raise _native_query_error(e) from None
        return scores, slots

    def work(self, q_indices, q_values, k: int, bits=None, prune: bool = True) -> int:
        """Postings a top_k reads (prune=False: every posting of the query's keys, the exhaustive
        evaluation); what shows the pruning at work."""
        qi, qv = _query(q_indices, q_values)
        try:
            return self._ix.search(qi, qv, int(k), _bits(bits), prune)[2]
        except ValueError as e:
            raise _native_query_error(e) from None

    def top_k_batch(self, queries: list, k: int, bits=None, threads: Optional[int] = None) -> tuple:
        """Several queries, each an (indices, values) pair as check_sparse returns, in one native
        call spread over `threads` (default: every core) -> (scores float32 (n, k), slots int64
        (n, k)), each row as top_k's, padded with -inf / -1 after its hits."""
        if k < 0:
            raise ConfigError(f"k must be >= 0, not {k}")
        parts = [_query(i, v) for i, v in queries]
        qptr = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(i) for i, _ in parts], out=qptr[1:])
        qi = np.concatenate([i for i, _ in parts]) if parts else np.empty(0, np.int32)
        qv = np.concatenate([v for _, v in parts]) if parts else np.empty(0, np.float32)
        threads = threads or os.cpu_count() or 1
        try:
            return self._ix.search_batch(qptr, qi, qv, int(k), _bits(bits), int(threads))
        except ValueError as e:
            raise _native_query_error(e) from None

    def scores_of(self, slots, q_indices, q_values) -> np.ndarray:
        """The exact score (float32) of each given slot for the query: 0 where it shares no key
        (or is not indexed). The same numbers top_k gives its hits."""
        qi, qv = _query(q_indices, q_values)
        slots = _int_array(slots, np.int64, "slots", -(2**63), 2**63 - 1)
        try:
            return self._ix.score(qi, qv, slots)
        except ValueError as e:
            raise _native_query_error(e) from None

    def matches(self, q_indices, bits=None) -> np.ndarray:
        """Slots (int64, ascending) sharing at least one key with the query and set in bits."""
        return self._ix.matches(_int_array(q_indices, np.int32, "query indices", 0, MAX_KEY), _bits(bits))

    def count(self, q_indices, bits=None) -> int:
        """How many slots matches() would give."""
        return self._ix.matches(_int_array(q_indices, np.int32, "query indices", 0, MAX_KEY), _bits(bits), True)

    def get(self, slot: int) -> tuple:
        """(indices int32, values float32) of one slot's document (empty when it has none)."""
        return self._ix.doc(int(slot))

    def __len__(self) -> int:
        """Slots holding a document with at least one key."""
        return self._ix.docs

    def stats(self) -> dict:
        """docs (slots indexed), postings, keys (distinct, with a posting), nbytes (allocated),
        block (postings per block maximum), window (slots per search window)."""
        ix = self._ix
        return {"docs": ix.docs, "postings": ix.nnz, "keys": ix.keys, "nbytes": ix.nbytes,
                "block": K.SPARSE_BLOCK, "window": K.SPARSE_WINDOW}

    # ------------------------------------------------------------ snapshot
    def to_arrays(self) -> dict:
        """Every document as CSR: slots int64 (ascending), indptr int64, indices int32, values
        float32 -- what add() and from_arrays() take."""
        slots, indptr, indices, values = self._ix.export()
        return {"slots": slots, "indptr": indptr, "indices": indices, "values": values}

    @classmethod
    def from_arrays(cls, arrays: dict) -> "SparseIndex":
        """An index holding to_arrays()'s documents (the postings are rebuilt in one batch).
        Anything malformed raises BackendError saying what."""
        try:
            slots, indptr, indices, values = (arrays[n] for n in ("slots", "indptr", "indices", "values"))
        except (KeyError, TypeError) as e:
            raise BackendError(f"sparse index snapshot: lacks the array {e}") from None
        for name, a, dtype in (("slots", slots, np.int64), ("indptr", indptr, np.int64),
                               ("indices", indices, np.int32), ("values", values, np.float32)):
            if not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != np.dtype(dtype):
                raise BackendError(f"sparse index snapshot: {name} is not a 1-d {np.dtype(dtype).name} array")
        if len(indptr) != len(slots) + 1 or indptr[0] != 0 or indptr[-1] != len(indices) or len(values) != len(indices):
            raise BackendError("sparse index snapshot: indptr does not split indices and values into one row per slot")
        if (np.diff(indptr) <= 0).any():
            raise BackendError("sparse index snapshot: a slot without entries, or indptr not ascending")
        if len(slots) and (slots[0] < 0 or (np.diff(slots) <= 0).any()):
            raise BackendError("sparse index snapshot: slots are not distinct, ascending and >= 0")
        index = cls()
        try:
            index.add(slots, indptr, indices, values)
        except SchemaError as e:
            raise BackendError(f"sparse index snapshot: {e}") from None
        return index

    def to_bytes(self) -> bytes:
        """The documents as bytes: a header (magic, counts), the CSR arrays little-endian, and a
        CRC-32 of all of it."""
        a = self.to_arrays()
        body = b"".join([_HEAD.pack(_MAGIC, len(a["slots"]), len(a["indices"])),
                         a["slots"].astype("<i8").tobytes(), a["indptr"].astype("<i8").tobytes(),
                         a["indices"].astype("<i4").tobytes(), a["values"].astype("<f4").tobytes()])
        return body + _CRC.pack(zlib.crc32(body))

    @classmethod
    def from_bytes(cls, data) -> "SparseIndex":
        """The index of to_bytes()'s output. A truncated, extended or damaged input raises
        BackendError (sizes and checksum first, then every entry)."""
        buf = memoryview(data).cast("B")
        if len(buf) < _HEAD.size + _CRC.size:
            raise BackendError(f"sparse index snapshot: {len(buf)} bytes is too short for its header")
        magic, nd, nnz = _HEAD.unpack_from(buf, 0)
        if magic != _MAGIC:
            raise BackendError("sparse index snapshot: not a sparse index snapshot (bad magic)")
        want = _HEAD.size + 8 * nd + 8 * (nd + 1) + 8 * nnz + _CRC.size
        if want != len(buf):
            raise BackendError(f"sparse index snapshot: {len(buf)} bytes where its header "
                               f"({nd} slots, {nnz} entries) says {want}")
        (crc,) = _CRC.unpack_from(buf, len(buf) - _CRC.size)
        if zlib.crc32(buf[: len(buf) - _CRC.size]) != crc:
            raise BackendError("sparse index snapshot: checksum mismatch (the bytes are damaged)")
        at = _HEAD.size
        arrays = {}
        for name, dtype, count in (("slots", "<i8", nd), ("indptr", "<i8", nd + 1),
                                   ("indices", "<i4", nnz), ("values", "<f4", nnz)):
            raw = np.frombuffer(buf, dtype=dtype, count=count, offset=at)
            arrays[name] = raw.astype(raw.dtype.newbyteorder("="))
            at += raw.nbytes
        return cls.from_arrays(arrays)
