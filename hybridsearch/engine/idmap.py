"""IdMap: document id -> slot without a Python object per document.

The bulk of the map is two sorted numpy arrays, the 64-bit hash of each id and
its slot (16 bytes per document); the ids themselves are the store's
StringColumn, which verifies every hash hit, so a collision costs a second look,
never a wrong answer. Recent inserts wait in a small dict and are merged into
the arrays once it outgrows an eighth of them (amortised O(log n) per insert,
never one O(n) copy per document). Deleted entries are marked -1 in place and
dropped at the next merge.

Hashes are Python's str hash: stable within a process, which is all an
in-memory map needs.
"""
from __future__ import annotations

import numpy as np

from hybridsearch.engine.strings import StringColumn

_MIN_DELTA = 4096


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
        h = hash(id)
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

    def get_many(self, ids: list) -> np.ndarray:
        """Slot of each id, -1 where absent: one searchsorted for the batch."""
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
            h = np.fromiter(map(hash, ids), dtype=np.int64, count=n)
            pos = np.searchsorted(self.hashes, h)
            pos_c = np.minimum(pos, len(self.hashes) - 1)
            hit = (pos < len(self.hashes)) & (self.hashes[pos_c] == h) & (self.slots[pos_c] >= 0)
            cand = np.flatnonzero(hit)
            if len(cand):
                slots = self.slots[pos_c[cand]]
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

    def add(self, ids: list, slots) -> None:
        """Maps new ids (absent from the map) to their slots."""
        slots = np.asarray(slots, dtype=np.int64)
        if len(ids) >= max(_MIN_DELTA, len(self.hashes) // 8):
            self._merge(np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids)), slots)
        else:
            self.delta.update(zip(ids, slots.tolist()))
            if len(self.delta) > max(_MIN_DELTA, len(self.hashes) // 8):
                self._merge(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        self.n += len(ids)

    def _merge(self, hashes: np.ndarray, slots: np.ndarray) -> None:
        if self.delta:
            keys = list(self.delta)
            hashes = np.concatenate([hashes, np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))])
            slots = np.concatenate([slots, np.fromiter(self.delta.values(), dtype=np.int64, count=len(keys))])
            self.delta = {}
        keep = self.slots >= 0
        all_h = np.concatenate([self.hashes[keep], hashes])
        all_s = np.concatenate([self.slots[keep], slots])
        order = np.argsort(all_h, kind="stable")
        self.hashes, self.slots = all_h[order], all_s[order]

    def remove(self, ids: list) -> np.ndarray:
        """Unmaps the ids; returns the slots they had (-1 where absent)."""
        out = np.full(len(ids), -1, dtype=np.int64)
        for k, id_ in enumerate(ids):
            s = self.delta.pop(id_, None)
            if s is None:
                i = self._find(id_)
                if i < 0:
                    continue
                s = int(self.slots[i])
                self.slots[i] = -1
            out[k] = s
        self.n -= int((out >= 0).sum())
        return out

    def rebuild(self, ids: list, slots) -> None:
        """Starts over with exactly these (id, slot) pairs."""
        self.hashes = np.zeros(0, dtype=np.int64)
        self.slots = np.zeros(0, dtype=np.int64)
        self.delta = {}
        self.n = 0
        if len(ids):
            self._merge(np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids)),
                        np.asarray(slots, dtype=np.int64))
            self.n = len(ids)
