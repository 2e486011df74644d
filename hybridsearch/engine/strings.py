"""StringColumn: one string (or None) per slot, as UTF-8 bytes in one growable buffer.

A slot's value is `data[start[slot] : start[slot] + length[slot]]`, length -1 for
None. A write appends to the buffer and repoints the slot, so rewriting a value
leaves its old bytes behind as garbage; once garbage outweighs the live bytes
the buffer is rewritten in slot order. Memory per value: its UTF-8 bytes plus 12
bytes, against ~50-100 bytes of Python object per str in a list.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K

_MIN_BYTES = 1 << 16


@dataclass
class Encoded:
    """A batch of strings as UTF-8 spans: value i is blob[start[i] : start[i] + length[i]]
    (length -1 for None), the values end to end in row order. `hashes` (the stable hash of
    engine/idmap.py per value) once grouped() computed it. Built once when a batch is
    validated, then read by every write of that batch (ids, id map, keyword codes, texts)."""

    blob: np.ndarray
    start: np.ndarray
    length: np.ndarray
    hashes: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.start)

    def grouped(self) -> tuple:
        """(group int32 per value, first row of each group, last row of each group): equal
        strings share a group, numbered by first appearance; -1 for None. One C pass, which
        also fills `hashes`."""
        self.hashes, group, first, last = K.group_spans(self.blob, self.start, self.length)
        return group, first, last

    def distinct(self) -> bool:
        """Whether no value occurs twice: sorted hashes all differ (a sort, no table), else the
        exact grouping decides (a hash collision is not a repeat)."""
        h = np.sort(self.hashed())
        if not (h[1:] == h[:-1]).any():
            return True
        _, first, _ = self.grouped()
        return len(first) == len(self)

    def hashed(self) -> np.ndarray:
        """The stable hash of every value (as of an empty string for None)."""
        if self.hashes is None:
            self.hashes = K.hash_spans(self.blob, self.start, self.length)
        return self.hashes


def encode_strings(values: list) -> Optional[Encoded]:
    """The values (each an exact str or None) as one UTF-8 buffer, in one native pass; None
    when some value is neither, or holds a lone surrogate (the caller's slower path names it)."""
    blob, start, length, bad = K.encode_strs(values if type(values) is list else list(values))
    return None if bad >= 0 else Encoded(blob, start, length)


def _encode(values: list) -> tuple:
    """(UTF-8 bytes of all values end to end, int64 length of each, -1 for None)."""
    enc = encode_strings(values)
    if enc is not None:
        return enc.blob, enc.length
    encoded = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    lengths = np.fromiter((-1 if b is None else len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    return b"".join(b for b in encoded if b is not None), lengths


class StringColumn:
    """Strings by slot in one UTF-8 buffer (see the module docstring)."""

    def __init__(self) -> None:
        self.start = np.zeros(0, dtype=np.int64)
        self.length = np.full(0, -1, dtype=np.int32)
        self.data = np.zeros(_MIN_BYTES, dtype=np.uint8)
        self.used = 0  # bytes of `data` written so far
        self.garbage = 0  # bytes no slot points to any more

    @property
    def nbytes(self) -> int:
        return int(self.start.nbytes + self.length.nbytes + self.data.nbytes)

    def grow(self, cap: int) -> None:
        """Room for slots [0, cap); new slots hold None."""
        if cap <= len(self.start):
            return
        start = np.zeros(cap, dtype=np.int64)
        start[: len(self.start)] = self.start
        length = np.full(cap, -1, dtype=np.int32)
        length[: len(self.length)] = self.length
        self.start, self.length = start, length

    def _reserve(self, extra: int) -> None:
        need = self.used + extra
        if need <= len(self.data):
            return
        cap = max(len(self.data) * 2, _MIN_BYTES)
        while cap < need:
            cap *= 2
        data = np.zeros(cap, dtype=np.uint8)
        data[: self.used] = self.data[: self.used]
        self.data = data

    def set(self, slots: np.ndarray, values: list, enc: Optional[Encoded] = None) -> None:
        """Writes values[i] (a str, bytes or None) at slots[i]: one buffer append for the batch.
        `enc`: the values already encoded (Encoded of exactly these values), not encoded again."""
        if enc is not None:
            blob, lengths = enc.blob, enc.length
        else:
            blob, lengths = _encode(values)
        slots = np.asarray(slots, dtype=np.int64)
        old = self.length[slots]
        self.garbage += int(old[old > 0].sum())
        self._reserve(len(blob))
        self.data[self.used: self.used + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        if enc is not None:  # the spans lie end to end from 0: each start moves by what is used
            starts = self.used + enc.start
        else:
            sizes = np.maximum(lengths, 0)
            starts = self.used + np.cumsum(sizes) - sizes
        self.start[slots] = starts
        self.length[slots] = lengths
        self.used += len(blob)
        if self.garbage > max(_MIN_BYTES, self.used - self.garbage):
            self.compact()

    def clear(self, slots: np.ndarray) -> None:
        """Sets the slots to None (their bytes become garbage)."""
        slots = np.asarray(slots, dtype=np.int64)
        old = self.length[slots]
        self.garbage += int(old[old > 0].sum())
        self.length[slots] = -1
        self.start[slots] = 0  # a span of no bytes points nowhere: a later compaction cannot strand it

    def raw(self, slot: int) -> Optional[bytes]:
        return self.raw_many([slot])[0]

    def get(self, slot: int) -> Optional[str]:
        return self.get_many([slot])[0]

    def _spans(self, slots) -> tuple:
        slots = np.asarray(slots, dtype=np.int64)
        return memoryview(self.data), self.start[slots].tolist(), self.length[slots].tolist()

    def get_many(self, slots) -> list:
        """The strings at these slots (None where a slot holds none); each decoded straight from
        the buffer, never copying more than its own bytes."""
        buf, starts, lengths = self._spans(slots)
        return [None if n < 0 else str(buf[s: s + n], "utf-8") for s, n in zip(starts, lengths)]

    def raw_many(self, slots) -> list:
        """The bytes at these slots (None where a slot holds none)."""
        buf, starts, lengths = self._spans(slots)
        return [None if n < 0 else buf[s: s + n].tobytes() for s, n in zip(starts, lengths)]

    def hashes(self, slots) -> np.ndarray:
        """The stable hash (engine/idmap.py) of the strings at these slots, in C over the buffer."""
        slots = np.asarray(slots, dtype=np.int64)
        return K.hash_spans(self.data, self.start[slots], self.length[slots])

    def equals_spans(self, slots: np.ndarray, enc: Encoded, rows: np.ndarray) -> np.ndarray:
        """The string at slots[i] == value rows[i] of `enc`, as a bool array, compared in C."""
        slots = np.asarray(slots, dtype=np.int64)
        return K.spans_equal(self.data, self.start[slots], self.length[slots],
                             enc.blob, enc.start[rows], enc.length[rows])

    def equals(self, slots: np.ndarray, values: list) -> np.ndarray:
        """values[i] == the string at slots[i], as a bool array (for verifying hash lookups)."""
        return np.fromiter((a == b for a, b in zip(self.get_many(slots), values)), dtype=bool, count=len(values))

    def compact(self) -> None:
        """Rewrites the buffer with only the bytes some slot points to, in slot order."""
        have = np.flatnonzero(self.length > 0)
        lengths = self.length[have].astype(np.int64)
        total = int(lengths.sum())
        data = np.zeros(max(_MIN_BYTES, 2 * total), dtype=np.uint8)
        if total:
            # gather every live byte with one fancy index: position = start + offset within the value
            starts = self.start[have]
            new_starts = np.cumsum(lengths) - lengths
            within = np.arange(total, dtype=np.int64) - np.repeat(new_starts, lengths)
            data[:total] = self.data[np.repeat(starts, lengths) + within]
            self.start[have] = new_starts
        # empty strings and Nones hold no bytes: their old offsets may lie past the new end
        self.start[self.length <= 0] = 0
        self.data, self.used, self.garbage = data, total, 0

    def export(self, n: int) -> tuple:
        """(garbage bytes, arrays) of slots [0, n) for a snapshot: no copy."""
        return self.garbage, {"data": self.data[: self.used], "start": self.start[:n], "length": self.length[:n]}

    def restore(self, garbage: int, arrays: dict, prefix: str, n: int) -> None:
        """Takes back what export() gave (views of a mapped file, kept as they are until a write
        outgrows them); ValueError if a span leaves the buffer."""
        data, start, length = (arrays.get(f"{prefix}/{k}") for k in ("data", "start", "length"))
        if (data is None or start is None or length is None or data.dtype != np.uint8 or data.ndim != 1
                or start.dtype != np.int64 or start.shape != (n,) or length.dtype != np.int32
                or length.shape != (n,) or type(garbage) is not int or not 0 <= garbage <= len(data)):
            raise ValueError(f"{prefix}: missing or malformed string column")
        if n and int(length.min()) < -1:
            raise ValueError(f"{prefix}: a string has a negative length")
        spans = length > 0
        if spans.any() and (int(start[spans].min()) < 0 or int((start[spans] + length[spans]).max()) > len(data)):
            raise ValueError(f"{prefix}: a string runs outside its buffer")
        empty = ~spans & (start != 0)
        if empty.any():  # files written before compact() reset them (a copy-on-write mapping)
            start = start.copy() if not start.flags.writeable else start
            start[empty] = 0
        self.data, self.start, self.length = data, start, length
        self.used, self.garbage = len(data), garbage

    def take(self, keep: np.ndarray, m: int) -> None:
        """Keeps slots `keep` as slots 0..m-1 (the store's compaction), dropping the rest."""
        self.start[:m] = self.start[keep]
        self.length[:m] = self.length[keep]
        self.length[m:] = -1
        self.compact()
