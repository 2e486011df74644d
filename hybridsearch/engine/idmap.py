"""IdMap: document id -> slot without a Python object per document.

The bulk of the map is two sorted numpy arrays, the 64-bit hash of each id and
its slot (16 bytes per document); the ids themselves are the store's
StringColumn, which verifies every hash hit, so a collision costs a second look,
never a wrong answer. Recent inserts wait in a small dict and are merged into
the arrays once it outgrows an eighth of them (amortised O(log n) per insert,
never one O(n) copy per document). Deleted entries are marked -1 in place and
dropped at the next merge.

Hashes are the stable 64-bit hash of the UTF-8 bytes (kernels/hs_hash.c), computed
in C straight from the StringColumn's buffer, so the arrays mean the same in every
process: a snapshot saves them and a reopen maps them back (`export` / `restore`)
instead of hashing every id again. (Python's str hash is salted per process.)
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.engine.strings import Encoded, StringColumn, encode_strings

_MIN_DELTA = 4096


def _hash(id: str) -> int:
    # surrogatepass: a stored id is valid UTF-8, so an id that is not can only miss, never raise
    return K.hash_bytes(id.encode("utf-8", "surrogatepass"))


def hash_ids(ids: list) -> np.ndarray:
    """The stable 64-bit hash of each id (int64), computed in C."""
    enc = encode_strings(ids)
    if enc is not None:
        return enc.hashed()
    n = len(ids)  # a lone surrogate (an id that was never stored, so a miss): its bytes as Python writes them
    blob = "".join(ids).encode("utf-8", "surrogatepass")
    lengths = np.fromiter(map(len, ids), dtype=np.int32, count=n)
    if len(blob) != int(lengths.sum(dtype=np.int64)):  # not all ASCII: lengths in bytes
        enc = [i.encode("utf-8", "surrogatepass") for i in ids]
        lengths = np.fromiter(map(len, enc), dtype=np.int32, count=n)
        blob = b"".join(enc)
    starts = np.cumsum(lengths, dtype=np.int64) - lengths
    return K.hash_spans(np.frombuffer(blob, dtype=np.uint8), starts, lengths)


class IdMap:
    """id -> slot, verified against the ids stored in `ids` (a StringColumn by slot)."""

    def __init__(self, ids: StringColumn) -> None:
        self.ids = ids
        self.hashes = np.zeros(0, dtype=np.int64)
        self.slots = np.zeros(0, dtype=np.int64)
        self.delta: dict = {}
        self.n = 0

    def __len__(self) -> int:
        return self.n

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.slots.nbytes) + 100 * len(self.delta)

    def _find(self, id: str) -> int:
        """Index into the arrays of `id`, or -1."""
        h = _hash(id)
        hashes = self.hashes
        i = int(np.searchsorted(hashes, h))
        while i < len(hashes) and hashes[i] == h:
            s = int(self.slots[i])
            if s >= 0 and self.ids.get(s) == id:
                return i
            i += 1
        return -1

    def get(self, id: str, default=None):
        s = self.delta.get(id)
        if s is not None:
            return s
        i = self._find(id)
        return default if i < 0 else int(self.slots[i])

    def __contains__(self, id: str) -> bool:
        return self.get(id) is not None

    def get_many(self, ids: list, enc: Optional[Encoded] = None) -> np.ndarray:
        """Slot of each id, -1 where absent: one searchsorted for the batch. `enc`: the ids
        already encoded (a validated batch's), so hashes and verification come from its bytes."""
        n = len(ids)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0 or self.n == 0:
            return out
        if n <= 8:  # a handful: one lookup each costs less than the vector setup
            for i, id_ in enumerate(ids):
                s = self.get(id_)
                if s is not None:
                    out[i] = s
            return out
        if len(self.hashes):
            h = enc.hashed() if enc is not None else hash_ids(ids)
            pos = np.searchsorted(self.hashes, h)
            pos_c = np.minimum(pos, len(self.hashes) - 1)
            hit = (pos < len(self.hashes)) & (self.hashes[pos_c] == h) & (self.slots[pos_c] >= 0)
            cand = np.flatnonzero(hit)
            if len(cand):
                slots = self.slots[pos_c[cand]]
                if enc is not None:
                    ok = self.ids.equals_spans(slots, enc, cand)
                else:
                    ok = self.ids.equals(slots, [ids[i] for i in cand.tolist()])
                out[cand[ok]] = slots[ok]
            # a collision or a deleted first entry: look again one by one
            retry = np.flatnonzero((out < 0) & (pos < len(self.hashes)) & (self.hashes[pos_c] == h))
            for i in retry.tolist():
                j = self._find(ids[i])
                if j >= 0:
                    out[i] = self.slots[j]
        if self.delta:
            delta = self.delta
            for i, id_ in enumerate(ids):
                s = delta.get(id_)
                if s is not None:
                    out[i] = s
        return out

    def add(self, ids: list, slots, hashes: Optional[np.ndarray] = None) -> None:
        """Maps new ids (absent from the map, already written to the StringColumn at `slots`);
        `hashes`: theirs when the caller has them already."""
        slots = np.asarray(slots, dtype=np.int64)
        if len(ids) >= max(_MIN_DELTA, len(self.hashes) // 8):
            self._merge(self.ids.hashes(slots) if hashes is None else hashes, slots)
        else:
            self.delta.update(zip(ids, slots.tolist()))
            if len(self.delta) > max(_MIN_DELTA, len(self.hashes) // 8):
                self._merge(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self.n += len(ids)

    def _merge(self, hashes: np.ndarray, slots: np.ndarray) -> None:
        if self.delta:
            dslots = np.fromiter(self.delta.values(), dtype=np.int64, count=len(self.delta))
            hashes = np.concatenate([hashes, self.ids.hashes(dslots)])
            slots = np.concatenate([slots, dslots])
            self.delta = {}
        keep = self.slots >= 0
        all_h = np.concatenate([self.hashes[keep], hashes]).astype(np.int64, copy=False)
        all_s = np.concatenate([self.slots[keep], slots]).astype(np.int64, copy=False)
        K.sort_pairs(all_h, all_s)  # a stable radix sort in place (an argsort costs ~4x more)
        self.hashes, self.slots = all_h, all_s

    def remove(self, ids: list) -> np.ndarray:
        """Unmaps the ids (distinct); returns the slots they had (-1 where absent). The array
        part is found for the whole batch with one hash call and one searchsorted."""
        n = len(ids)
        out = np.full(n, -1, dtype=np.int64)
        if self.delta:
            pop = self.delta.pop
            for k, id_ in enumerate(ids):
                s = pop(id_, None)
                if s is not None:
                    out[k] = s
        rest = np.flatnonzero(out < 0)
        if len(rest) and len(self.hashes):
            sub = [ids[i] for i in rest.tolist()] if len(rest) < n else list(ids)
            h = hash_ids(sub)
            pos = np.searchsorted(self.hashes, h)
            pos_c = np.minimum(pos, len(self.hashes) - 1)
            same = (pos < len(self.hashes)) & (self.hashes[pos_c] == h)
            cand = np.flatnonzero(same & (self.slots[pos_c] >= 0))
            if len(cand):
                ok = cand[self.ids.equals(self.slots[pos_c[cand]], [sub[i] for i in cand.tolist()])]
                _, first = np.unique(pos_c[ok], return_index=True)  # an id given twice counts once
                ok = ok[first]
                out[rest[ok]] = self.slots[pos_c[ok]]
                self.slots[pos_c[ok]] = -1
            # a hash collision, or a removed entry first in a run of equal hashes: look one by one
            for i in rest[same & (out[rest] < 0)].tolist():
                j = self._find(ids[i])
                if j >= 0:
                    out[i] = self.slots[j]
                    self.slots[j] = -1
        self.n -= int((out >= 0).sum())
        return out

    def rebuild(self, slots) -> None:
        """Starts over with the ids the StringColumn holds at these slots."""
        slots = np.asarray(slots, dtype=np.int64)
        self.hashes = np.zeros(0, dtype=np.int64)
        self.slots = np.zeros(0, dtype=np.int64)
        self.delta = {}
        self.n = 0
        if len(slots):
            self._merge(self.ids.hashes(slots), slots)
            self.n = len(slots)

    def export(self) -> dict:
        """The map as two arrays (sorted hashes, slots; no deleted entries) for a snapshot."""
        if self.delta or (len(self.slots) and int(self.slots.min()) < 0):
            self._merge(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return {"hashes": self.hashes, "slots": self.slots}

    def restore(self, arrays: dict, count: int) -> None:
        """Takes back what export() gave (arrays may be views of a mapped file): checked to be
        sorted, in range and exactly `count` entries; ValueError otherwise."""
        hashes, slots = arrays.get("hashes"), arrays.get("slots")
        if (hashes is None or slots is None or hashes.dtype != np.int64 or slots.dtype != np.int64 or hashes.shape != (count,)
                or slots.shape != (count,)):
            raise ValueError("id map: wrong shape or type")
        if count and (np.any(hashes[1:] < hashes[:-1]) or int(slots.min()) < 0
                      or int(slots.max()) >= len(self.ids.start)):
            raise ValueError("id map: hashes out of order or slots out of range")
        self.hashes, self.slots, self.delta, self.n = hashes, slots, {}, count
