"""TokenStore: the token vectors of one multi-vector field (ColBERT-style late interaction)
and exact MaxSim over them (API.md section 10).

Each document ("slot", an int >= 0, e.g. a ColumnStore row) holds a block of 1..4096 token
rows of dimension d. All rows live in one row-major float32 block that grows by doubling; a
slot owns one contiguous run of it (`offset`, `count`), and `row_slot` names the owner of
every row (-1 once dead). Writes are real time: set() appends the new block and marks the
slot's old rows dead, remove() marks them dead, and the block is compacted (live slots in
slot order) once dead rows outnumber live ones.

MaxSim(Q, D) = sum over query rows q of max over document rows x of sim(q, x), with sim the
dot product (ip), the cosine (as if rows were normalised at write and query) or minus the
euclidean distance (l2). Rows are kept as written (so get() gives them back) with their
norms beside them; the native kernel (kernels/hs_maxsim.c) applies the metric, in one call
per query, without the GIL.

Not thread-safe by itself: like the other engine structures it relies on the collection's
lock (many readers or one writer).
"""
from __future__ import annotations

from numbers import Integral
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.errors import BackendError, ConfigError, SchemaError

# the value rules live with the schema (document.py checks values without the compiled core)
from hybridsearch.vector_rules import MAX_TOKENS, NORM_MAX, NORM_MIN, token_block  # noqa: F401
from hybridsearch.vector_rules import bad_norms as _bad_norms, row_norms_sq as _row_norms_sq

MAX_ROWS = K.MAXSIM_MAX_ROWS  # 4096 rows per document (API.md section 10)
assert MAX_ROWS == MAX_TOKENS, "kernels/hs_maxsim.h and vector_rules.py disagree on the row limit"
METRICS = ("cosine", "ip", "l2")
# of TokenStore.export(): bump when the arrays change meaning; attached() refuses any other
EXPORT_FORMAT = 1
# compaction waits for this many dead rows, so a small store is not rewritten per delete
_COMPACT_MIN_DEAD = 4096
# a filter keeping fewer than 1 in this many documents is answered by scoring just them
# (maxsim_of over the set bits) instead of a scan that skips the others row by row
_SPARSE_FILTER = 8
_MAX_SLOT = 2**62


def check_metric(metric) -> str:
    """The metric, or ConfigError naming the ones there are."""
    if metric not in METRICS:
        raise ConfigError(f"unknown multi-vector metric {metric!r}; use one of {', '.join(METRICS)}")
    return metric


class TokenStore:
    """Ragged token blocks by slot, with exact MaxSim top-k and rescoring (see the module doc)."""

    def __init__(self, d: int) -> None:
        if not isinstance(d, Integral) or isinstance(d, bool) or d < 1:
            raise ConfigError(f"a multi-vector dimension must be an int >= 1, not {d!r}")
        self.d = int(d)
        self._rows = np.zeros((0, self.d), dtype=np.float32)  # capacity = len(self._rows)
        self._inv = np.zeros(0, dtype=np.float32)    # 1 / |x| per row
        self._sq = np.zeros(0, dtype=np.float32)     # |x|^2 per row
        self._row_slot = np.zeros(0, dtype=np.int64)  # owner per row, -1 when dead
        self._n = 0      # rows in use (live or dead)
        self._dead = 0   # dead rows among them
        self._off = np.zeros(0, dtype=np.int64)      # per slot: first row
        self._cnt = np.zeros(0, dtype=np.int32)      # per slot: rows, 0 = holds nothing
        self._docs = 0
        self.compactions = 0

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        """Number of slots holding a block."""
        return self._docs

    def __contains__(self, slot) -> bool:
        return isinstance(slot, Integral) and 0 <= slot < len(self._cnt) and self._cnt[slot] > 0

    @property
    def rows_live(self) -> int:
        """Token rows of the live blocks."""
        return self._n - self._dead

    @property
    def rows_dead(self) -> int:
        """Rows of removed or overwritten blocks not compacted away yet."""
        return self._dead

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held (capacity included)."""
        return sum(a.nbytes for a in (self._rows, self._inv, self._sq, self._row_slot, self._off, self._cnt))

    def slots(self) -> np.ndarray:
        """The slots holding a block, ascending (int64)."""
        return np.flatnonzero(self._cnt).astype(np.int64)

    def count(self, slot: int) -> int:
        """Rows of the slot's block (0 when it holds none)."""
        return int(self._cnt[slot]) if slot in self else 0

    def get(self, slot: int) -> Optional[np.ndarray]:
        """A copy of the slot's block as written (float32 (n, d)), or None."""
        if slot not in self:
            return None
        o = int(self._off[slot])
        return self._rows[o:o + int(self._cnt[slot])].copy()

    # ------------------------------------------------------------------ writing
    def set(self, slot: int, block) -> None:
        """Stores (or replaces) the block of one slot."""
        self.set_many([slot], [block])

    def set_many(self, slots, blocks) -> None:
        """Stores (or replaces) the blocks of several slots: all are checked before any is
        written, so a bad one leaves the store as it was. A slot given twice keeps its last block."""
        slots = self._slots_arg(slots)
        blocks = list(blocks)
        if len(blocks) != len(slots):
            raise SchemaError(f"{len(slots)} slots but {len(blocks)} multi-vector blocks")
        arrs = [token_block(b, self.d) for b in blocks]
        if not arrs:
            return
        counts = np.fromiter((len(a) for a in arrs), dtype=np.int64, count=len(arrs))
        rows = np.concatenate(arrs) if len(arrs) > 1 else arrs[0]
        sq = _row_norms_sq(rows)
        self._kill(slots)
        self._reserve_rows(self._n + len(rows))
        # a slot given twice: its earlier blocks are written dead, its last one live
        last = np.zeros(len(slots), dtype=bool)
        _, first_from_end = np.unique(slots[::-1], return_index=True)
        last[len(slots) - 1 - first_from_end] = True
        starts = self._n + np.concatenate(([0], np.cumsum(counts)[:-1]))
        end = self._n + len(rows)
        self._rows[self._n:end] = rows
        self._sq[self._n:end] = sq
        self._inv[self._n:end] = 1.0 / np.sqrt(sq)
        self._row_slot[self._n:end] = np.repeat(np.where(last, slots, -1), counts)
        self._dead += int(counts[~last].sum())
        self._n = end
        self._reserve_slots(int(slots.max()) + 1)
        self._off[slots[last]] = starts[last]
        self._cnt[slots[last]] = counts[last]
        self._docs += int(last.sum())
        self._maybe_compact()

    def remove(self, slots) -> int:
        """Drops the blocks of the given slots (those holding none are skipped); returns how
        many were dropped."""
        n = self._kill(self._slots_arg(slots))
        self._maybe_compact()
        return n

    def compact(self) -> None:
        """Rewrites the rows without the dead ones, live slots in ascending order (so a scan
        reads them in slot order)."""
        live = self.slots()
        counts = self._cnt[live].astype(np.int64)
        total = int(counts.sum())
        src = np.repeat(self._off[live] - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(total)
        cap = max(total, 16)
        rows = np.zeros((cap, self.d), dtype=np.float32)
        rows[:total] = self._rows[src]
        inv, sq = np.zeros(cap, dtype=np.float32), np.zeros(cap, dtype=np.float32)
        inv[:total], sq[:total] = self._inv[src], self._sq[src]
        row_slot = np.full(cap, -1, dtype=np.int64)
        row_slot[:total] = np.repeat(live, counts)
        self._rows, self._inv, self._sq, self._row_slot = rows, inv, sq, row_slot
        self._off[live] = np.concatenate(([0], np.cumsum(counts)[:-1]))
        self._n, self._dead = total, 0
        self.compactions += 1

    def _slots_arg(self, slots) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(slots))
        if arr.ndim != 1 or (len(arr) and arr.dtype.kind not in "iu"):
            raise ConfigError("slots must be ints")
        arr = arr.astype(np.int64)
        if len(arr) and (arr.min() < 0 or arr.max() >= _MAX_SLOT):
            raise ConfigError(f"slots must be ints in [0, 2**62); got {int(arr.min())}..{int(arr.max())}")
        return arr

    def _kill(self, slots: np.ndarray) -> int:
        """Marks the rows of the slots' current blocks dead; returns how many slots had one."""
        slots = np.unique(slots[slots < len(self._cnt)])
        slots = slots[self._cnt[slots] > 0]
        for s in slots.tolist():
            o, c = int(self._off[s]), int(self._cnt[s])
            self._row_slot[o:o + c] = -1
            self._dead += c
        self._cnt[slots] = 0
        self._docs -= len(slots)
        return len(slots)

    def _maybe_compact(self) -> None:
        if self._dead >= _COMPACT_MIN_DEAD and self._dead > self._n - self._dead:
            self.compact()

    def _reserve_rows(self, need: int) -> None:
        cap = len(self._rows)
        if need <= cap:
            return
        cap = max(need, 2 * cap, 1024)
        n = self._n
        rows = np.zeros((cap, self.d), dtype=np.float32)
        rows[:n] = self._rows[:n]
        inv, sq = np.zeros(cap, dtype=np.float32), np.zeros(cap, dtype=np.float32)
        inv[:n], sq[:n] = self._inv[:n], self._sq[:n]
        row_slot = np.full(cap, -1, dtype=np.int64)
        row_slot[:n] = self._row_slot[:n]
        self._rows, self._inv, self._sq, self._row_slot = rows, inv, sq, row_slot

    def _reserve_slots(self, need: int) -> None:
        cap = len(self._cnt)
        if need <= cap:
            return
        cap = max(need, 2 * cap, 1024)
        off, cnt = np.zeros(cap, dtype=np.int64), np.zeros(cap, dtype=np.int32)
        off[:len(self._off)], cnt[:len(self._cnt)] = self._off, self._cnt
        self._off, self._cnt = off, cnt

    # ------------------------------------------------------------------ MaxSim
    def _native_store(self) -> tuple:
        n = self._n
        return self._rows, self._inv, self._sq, self._row_slot[:n], self._off, self._cnt

    def query_block(self, Q) -> np.ndarray:
        """A query (m, d) checked by the rules of a stored block (SchemaError otherwise)."""
        return token_block(Q, self.d, "a multi-vector query")

    def maxsim_top_k(self, Q, k: int, metric: str, bits: Optional[np.ndarray] = None) -> tuple:
        """Exact MaxSim top-k of query Q (m, d) over every slot holding a block, or only those
        whose bit is set in `bits` (uint64 words, bit s of word s // 64, as ColumnStore's):
        (scores float32, slots int64), best first, ties to the lower slot, at most k of them."""
        metric = check_metric(metric)
        if not isinstance(k, Integral) or isinstance(k, bool) or k < 0:
            raise ConfigError(f"k must be an int >= 0, not {k!r}")
        Q = self.query_block(Q)
        if bits is not None:
            bits = np.ascontiguousarray(bits, dtype=np.uint64)
            if bits.ndim != 1:
                raise ConfigError("a filter bitset must be a 1-d array of uint64 words")
            wanted = K.popcount(bits)
            if wanted * _SPARSE_FILTER < self._docs or metric == "l2":
                return self._top_k_of(K.bitset_to_indices(bits, wanted), Q, int(k), metric)
        if metric == "l2":
            # the tiled scan ranks l2 by 2q.x - |x|^2, which loses small distances between
            # rows far from the origin (the top-k it picks would be wrong, however exactly it
            # is rescored): every block is scored on the exact distances instead
            return self._top_k_of(self.slots(), Q, int(k), metric)
        return K.maxsim_top_k(*self._native_store(), Q, metric, bits, int(k))

    def _top_k_of(self, slots: np.ndarray, Q: np.ndarray, k: int, metric: str) -> tuple:
        slots = slots[slots < len(self._cnt)]
        slots = slots[self._cnt[slots] > 0]
        scores = K.maxsim_of(*self._native_store(), slots, Q, metric)
        # slots ascend, so a stable sort on the score leaves ties to the lower slot
        order = np.argsort(-scores, kind="stable")[:k]
        return scores[order], slots[order]

    def maxsim_of(self, slots, Q, metric: str) -> np.ndarray:
        """Exact MaxSim of Q against each given slot (float32; NaN where a slot holds no
        block): the rescoring of candidates gathered elsewhere."""
        metric = check_metric(metric)
        Q = self.query_block(Q)
        slots = np.ascontiguousarray(np.atleast_1d(np.asarray(slots)))
        if slots.ndim != 1 or (len(slots) and slots.dtype.kind not in "iu"):
            raise ConfigError("slots must be ints")
        slots = slots.astype(np.int64, copy=False)
        return K.maxsim_of(*self._native_store(), slots, Q, metric)

    # ------------------------------------------------------------------ snapshot
    def export(self) -> tuple:
        """(meta, arrays) of the live blocks in slot order: meta is small and JSON-serialisable;
        arrays are "slots" (int64, ascending), "counts" (int32, rows per slot) and "rows"
        (float32 (sum of counts, d)), views of the store valid until its next write (it is
        compacted first when it holds dead rows), so a snapshot writes them as they are."""
        if self._dead or not self._in_slot_order():
            self.compact()
        live = self.slots()
        arrays = {"slots": live, "counts": self._cnt[live].copy(), "rows": self._rows[:self._n]}
        meta = {"format": EXPORT_FORMAT, "d": self.d, "docs": int(len(live)), "rows": int(self._n),
                "slots_end": int(live[-1]) + 1 if len(live) else 0}
        return meta, arrays

    def _in_slot_order(self) -> bool:
        live = self.slots()
        counts = self._cnt[live].astype(np.int64)
        return bool(np.array_equal(self._off[live], np.concatenate(([0], np.cumsum(counts)[:-1]))[:len(live)]))

    @classmethod
    def attached(cls, meta, arrays, d: Optional[int] = None, slot_limit: Optional[int] = None) -> "TokenStore":
        """A store over export()'s output (e.g. read-only views of a mapped file): the rows are
        read in place and copied on the first write. Everything is checked first; damaged or
        truncated data (or another format, a dimension other than `d`, a slot >= `slot_limit`)
        raises BackendError."""
        def bad(what: str) -> BackendError:
            return BackendError(f"the multi-vector snapshot is damaged: {what}")

        if not isinstance(meta, dict) or not isinstance(arrays, dict):
            raise bad("its header or arrays are not mappings")
        if meta.get("format") != EXPORT_FORMAT:
            raise BackendError(f"the multi-vector snapshot has format {meta.get('format')!r}; "
                               f"this version reads format {EXPORT_FORMAT}")
        md = meta.get("d")
        if not isinstance(md, int) or isinstance(md, bool) or md < 1:
            raise bad(f"its dimension {md!r} is not an int >= 1")
        if d is not None and md != d:
            raise BackendError(f"the multi-vector snapshot has dimension {md}, the field {d}")
        try:
            slots, counts, rows = arrays["slots"], arrays["counts"], arrays["rows"]
        except KeyError as e:
            raise bad(f"the array {e.args[0]!r} is missing") from None
        for name, a, dt, nd in (("slots", slots, np.int64, 1), ("counts", counts, np.int32, 1),
                                ("rows", rows, np.float32, 2)):
            if not isinstance(a, np.ndarray) or a.dtype != np.dtype(dt) or a.ndim != nd:
                raise bad(f"{name} is not a {nd}-d {np.dtype(dt).name} array")
        if len(slots) != len(counts) or meta.get("docs") != len(slots):
            raise bad(f"{len(slots)} slots, {len(counts)} counts, header says {meta.get('docs')!r} documents")
        if len(slots) and (slots[0] < 0 or slots[-1] >= _MAX_SLOT or (np.diff(slots) <= 0).any()):
            raise bad("the slots are not distinct ascending ints in [0, 2**62)")
        # the per-slot arrays are as long as the last slot: a damaged slot must not size them
        end = int(slots[-1]) + 1 if len(slots) else 0
        if meta.get("slots_end") != end or (slot_limit is not None and end > slot_limit):
            raise bad(f"the slots end at {end}; the header says {meta.get('slots_end')!r}"
                      + ("" if slot_limit is None else f", the collection has {slot_limit} rows"))
        if len(counts) and (counts.min() < 1 or counts.max() > MAX_ROWS):
            raise bad(f"a document has a row count outside 1..{MAX_ROWS}")
        total = int(counts.sum(dtype=np.int64))
        if rows.shape != (total, md) or meta.get("rows") != total:
            raise bad(f"rows has shape {rows.shape}; the counts and header need ({total}, {md})")
        rows = np.ascontiguousarray(rows)
        sq = _row_norms_sq(rows)
        badrows = _bad_norms(sq)
        if badrows.any():
            raise bad(f"token row {int(np.argmax(badrows))} is not finite or its norm is out of range")
        st = cls(md)
        n_slots = int(slots[-1]) + 1 if len(slots) else 0
        st._reserve_slots(n_slots)
        offs = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)[:-1]))[:len(slots)]
        st._off[slots], st._cnt[slots] = offs, counts
        # capacity == rows: the first write reallocates, so a read-only mapped block is never written
        st._rows = rows
        st._sq = sq.astype(np.float32)
        st._inv = (1.0 / np.sqrt(sq)).astype(np.float32)
        st._row_slot = np.repeat(slots, counts.astype(np.int64))
        st._n, st._docs = total, len(slots)
        return st
