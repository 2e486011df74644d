"""ColumnStore: the columnar layout every embedded storage keeps in RAM.

Rows ("slots") hold one document each, in insertion order, and the document
exists only as its columns: numeric and bool fields in int64/float64 arrays
(what the user stored, compared exactly), keywords as int32 codes into a
per-field dictionary, ids and text in StringColumns (one UTF-8 buffer each),
the unindexed fields of a row as one JSON array in a StringColumn, and each
dense vector field in one contiguous float32 block (engine/dense.py). `documents(rows)` builds the
documents of the rows asked for, when a user reads them. Ids map to slots
through an IdMap (two sorted numpy arrays, no Python object per document).
Arrays grow by doubling, so appends are amortised O(1) and never copy the
whole block per batch. Deleted rows are tombstoned in the `live` bitset and
compacted away once they outnumber the live ones.

With `reuse_slots=True` (graph storages, whose node ids are slots) rows never
move: deleted slots go to a free list and are filled by later inserts, and a
per-slot sequence number keeps insertion order for listings.
"""
from __future__ import annotations

import heapq
import json
import sys
from itertools import repeat
from typing import Optional

import numpy as np

from hybridsearch._native import _kernels as K
from hybridsearch.batch import Batch, documents, python_values, row_vectors, with_missing
from hybridsearch.document import Kind, Schema, extras_adapter
from hybridsearch.engine.dense import DenseColumn
from hybridsearch.engine.fieldvectors import field_columns
from hybridsearch.engine.idmap import IdMap
from hybridsearch.engine.program import Column, ProgramBuilder, string_predicate
from hybridsearch.engine.strings import Encoded, StringColumn, encode_strings
from hybridsearch.query.filters import In, MatchAll, Node

_COLUMN_DTYPES = {Kind.INT: np.int64, Kind.BOOL: np.int64, Kind.FLOAT: np.float64, Kind.KEYWORD: np.int32}
_MIN_CAPACITY = 1024


class ColumnStore:
    """Columns, vectors and ids of one collection, by slot."""

    def __init__(self, schema: Schema, metric="cosine", reuse_slots: bool = False) -> None:
        """`metric`: one metric for every dense field, or a dict field -> metric (fields not
        named: "cosine"), as storages/base.py resolve_metrics gives it."""
        self.schema = schema
        self.metrics = {name: (metric if isinstance(metric, str) else metric.get(name, "cosine"))
                        for name in schema.vectors}
        # the metric of the schema's one dense field (what single-field callers read)
        self.metric = self.metrics[schema.vector.name] if schema.vector else (
            metric if isinstance(metric, str) else "cosine")
        self.reuse_slots = reuse_slots
        self.free: list = []  # heap of reusable slots (reuse_slots only)
        self.seq = np.zeros(0, dtype=np.int64)  # insertion sequence per slot
        self.compactions = 0  # bumped whenever slots are renumbered
        self.next_seq = 0
        self.n = 0  # slots in use (live or tombstoned)
        self.n_live = 0
        self.cap = 0
        self.ids = StringColumn()
        self.row_of = IdMap(self.ids)
        self.live = np.zeros(0, dtype=np.uint64)
        self.values: dict = {}
        self.present: dict = {}
        self.kw_dictionary: dict = {}
        self.kw_codes: dict = {}
        self.strings: dict = {}  # text field -> StringColumn
        self.extra_names, self.extra_adapter = extras_adapter(schema)
        self.extras = StringColumn() if self.extra_names else None
        for spec in schema.fields.values():
            if spec.kind in _COLUMN_DTYPES:
                self.values[spec.name] = np.zeros(0, dtype=_COLUMN_DTYPES[spec.kind])
            if spec.kind is Kind.KEYWORD:
                self.kw_dictionary[spec.name] = []
                self.kw_codes[spec.name] = {}
            if spec.kind is Kind.TEXT:
                self.strings[spec.name] = StringColumn()
            if spec.optional:
                self.present[spec.name] = np.zeros(0, dtype=np.uint8)
        self.dense = {name: DenseColumn(spec, self.metrics[name]) for name, spec in schema.vectors.items()}
        # sparse and multi-vector fields (engine/fieldvectors.py), by slot like every column
        self.fieldvecs = field_columns(schema, metric if isinstance(metric, dict)
                                       else {k: metric for k in schema.multi})
        self.restored_metrics: dict = {}  # dense field -> metric a restored snapshot recorded
        # the schema's one dense field (None without exactly one): the native find path's
        self.vec_spec = schema.vector
        self.dim = schema.vector.dim if schema.vector else 0
        self._no_vectors = np.zeros((0, 1), dtype=np.float32), np.zeros(0, dtype=np.float32)

    @property
    def vectors(self) -> np.ndarray:
        """The block of the schema's one dense field (single-field callers)."""
        return self.dense[self.vec_spec.name].vectors if self.vec_spec else self._no_vectors[0]

    @property
    def aux(self) -> np.ndarray:
        return self.dense[self.vec_spec.name].aux if self.vec_spec else self._no_vectors[1]

    def column_of(self, field: Optional[str]) -> DenseColumn:
        """The DenseColumn of a dense field; None names the schema's one dense field."""
        return self.dense[field if field is not None else self.vec_spec.name]

    def _vector_keys(self, name: str) -> tuple:
        """Snapshot array names of a dense field: the one field keeps the names snapshots have
        always used ("vectors", "aux"), so they still open; several fields are named."""
        if self.vec_spec is not None:
            return "vectors", "aux"
        return f"vectors/{name}", f"aux/{name}"

    def _string_columns(self) -> list:
        return [self.ids, *self.strings.values(), *([self.extras] if self.extras is not None else [])]

    def _named_string_columns(self) -> list:
        return [("ids", self.ids), *((f"text/{k}", c) for k, c in self.strings.items()),
                *([("extras", self.extras)] if self.extras is not None else [])]

    # ------------------------------------------------------------ snapshots
    def export(self) -> tuple:
        """(meta, arrays): every column of slots [0, n) as arrays a snapshot maps back (no copy
        of the big ones; the keyword dictionaries as JSON bytes)."""
        n = self.n
        arrays = {"seq": self.seq[:n], "live": self.live[: n // 64 + 1]}
        for name, col in self.dense.items():
            vkey, akey = self._vector_keys(name)
            arrays[vkey], arrays[akey] = col.vectors[:n], col.aux[:n]
        arrays.update({f"values/{k}": v[:n] for k, v in self.values.items()})
        arrays.update({f"present/{k}": v[:n] for k, v in self.present.items()})
        arrays.update({f"keywords/{k}": np.frombuffer(json.dumps(d).encode(), dtype=np.uint8)
                       for k, d in self.kw_dictionary.items()})
        arrays.update({f"idmap/{k}": v for k, v in self.row_of.export().items()})
        garbage = {}
        for prefix, col in self._named_string_columns():
            garbage[prefix], parts = col.export(n)
            arrays.update({f"{prefix}/{k}": v for k, v in parts.items()})
        fieldvecs = {}
        for name, col in self.fieldvecs.items():
            fieldvecs[name], parts = col.export()
            arrays.update({f"fieldvecs/{name}/{k}": v for k, v in parts.items()})
        meta = {"n": n, "n_live": self.n_live, "next_seq": self.next_seq, "garbage": garbage,
                "metrics": dict(self.metrics), "fieldvecs": fieldvecs}
        return meta, arrays

    def restore(self, meta: dict, arrays: dict) -> None:
        """An empty store takes back what export() gave; the arrays stay views of the mapped
        file until a write outgrows them. Shapes, types and ranges are checked (ValueError),
        so a reader never indexes out of bounds."""
        n, n_live, next_seq = meta.get("n"), meta.get("n_live"), meta.get("next_seq")
        garbage = meta.get("garbage")
        if (not all(type(x) is int and x >= 0 for x in (n, n_live, next_seq)) or n_live > n
                or not isinstance(garbage, dict)):
            raise ValueError("columns: bad snapshot header")

        def take(name: str, dtype, shape: tuple) -> np.ndarray:
            a = arrays.get(name)
            if a is None or a.dtype != dtype or a.shape != shape:
                raise ValueError(f"columns: {name} is missing or has the wrong type or shape")
            return a

        live = take("live", np.uint64, (n // 64 + 1,))
        seq = take("seq", np.int64, (n,))
        dense = {}
        for name, col in self.dense.items():
            vkey, akey = self._vector_keys(name)
            dense[name] = take(vkey, np.float32, (n, col.dim)), take(akey, np.float32, (n,))
        metrics = meta.get("metrics")
        metrics = metrics if isinstance(metrics, dict) else {}
        values = {k: take(f"values/{k}", v.dtype, (n,)) for k, v in self.values.items()}
        present = {k: take(f"present/{k}", np.uint8, (n,)) for k in self.present}
        dictionaries = {}
        for k in self.kw_dictionary:
            try:
                d = json.loads(take(f"keywords/{k}", np.uint8, arrays[f"keywords/{k}"].shape).tobytes())
            except (ValueError, RecursionError, KeyError):
                raise ValueError(f"columns: keyword dictionary {k} is damaged") from None
            if not isinstance(d, list) or not all(type(v) is str for v in d) or len(set(d)) != len(d):
                raise ValueError(f"columns: keyword dictionary {k} is damaged")
            codes = values[k]
            if n and (int(codes.min()) < -1 or int(codes.max()) >= len(d)):
                raise ValueError(f"columns: keyword codes of {k} out of range")
            dictionaries[k] = d
        live_slots = np.flatnonzero(np.unpackbits(live.view(np.uint8), bitorder="little")[:n])
        if len(live_slots) != n_live or (n and int(seq.max()) >= max(next_seq, 1)):
            raise ValueError("columns: the live rows or sequence numbers do not add up")
        for prefix, col in self._named_string_columns():
            col.restore(garbage.get(prefix), arrays, prefix, n)
        if n_live and int(self.ids.length[live_slots].min()) < 0:
            raise ValueError("columns: a live row has no id")
        fv_meta = meta.get("fieldvecs") if isinstance(meta.get("fieldvecs"), dict) else {}
        for name, col in self.fieldvecs.items():
            prefix = f"fieldvecs/{name}/"
            col.restore(fv_meta.get(name, {}), {k[len(prefix):]: v for k, v in arrays.items()
                                                if k.startswith(prefix)}, n)
        self.row_of.restore({k: arrays.get(f"idmap/{k}") for k in ("hashes", "slots")}, n_live)
        self.live, self.seq = live, seq
        self.restored_metrics = dict(metrics)
        for name, (vectors, aux) in dense.items():
            self.dense[name].restore(vectors, aux, metrics.get(name))
        self.values, self.present = values, present
        for k, d in dictionaries.items():
            self.kw_dictionary[k] = d
            self.kw_codes[k] = dict(zip(d, range(len(d))))
        self.n, self.n_live, self.next_seq, self.cap = n, n_live, next_seq, n
        if self.reuse_slots:  # every free slot, ascending: already a heap
            dead = np.ones(n, dtype=bool)
            dead[live_slots] = False
            self.free = np.flatnonzero(dead).tolist()

    # ------------------------------------------------------------ capacity
    def reserve(self, needed: int) -> None:
        """Room for `needed` slots now: a write checks that an on-disk vector block can grow before
        it is logged (BackendError then, nothing logged or changed)."""
        self._grow(needed, strict=True)

    def _grow(self, needed: int, strict: bool = False) -> None:
        if needed <= self.cap:
            return
        cap = max(_MIN_CAPACITY, self.cap * 2)
        while cap < needed:
            cap *= 2

        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        for col in self.dense.values():  # first: a full disk refuses here, before anything grew
            col.grow(cap, self.n, strict)
        self.values = {k: grown(v) for k, v in self.values.items()}
        self.present = {k: grown(v) for k, v in self.present.items()}
        self.seq = grown(self.seq)
        for col in self._string_columns():
            col.grow(cap)
        live = np.zeros(cap // 64 + 1, dtype=np.uint64)
        live[: len(self.live)] = self.live
        self.live = live
        self.cap = cap

    @property
    def disk_vectors(self) -> bool:
        """Whether a dense field keeps its block in a file (vectors_on_disk)."""
        return any(col.backing is not None for col in self.dense.values())

    def release_vectors(self) -> None:
        """After a write: the on-disk blocks' pages leave the process (engine/vectorfile.py)."""
        for col in self.dense.values():
            col.release()

    def close_files(self) -> None:
        """close(): the on-disk blocks' files go now, not when the collector gets to them."""
        for col in self.dense.values():
            col.close()

    def nbytes(self) -> dict:
        """Bytes held per component (allocated capacity, not only the rows in use)."""
        return {
            "vectors": int(sum(c.nbytes for c in self.dense.values())),
            "ids": int(self.ids.nbytes + self.row_of.nbytes),
            "strings": int(sum(c.nbytes for c in self.strings.values())
                           + (self.extras.nbytes if self.extras is not None else 0)),
            "columns": int(sum(v.nbytes for v in self.values.values()) + sum(p.nbytes for p in self.present.values())
                           + self.seq.nbytes + self.live.nbytes),
            "keywords": int(sum(sys.getsizeof(k) + 100 for d in self.kw_dictionary.values() for k in d)),
            **self._fieldvec_nbytes(),
        }

    def _fieldvec_nbytes(self) -> dict:
        """"sparse" (the inverted indexes of the hs.SparseVector fields) and "multivectors" (the
        token stores of the hs.MultiVector fields), each present when the schema has such a field."""
        out = {}
        for col in self.fieldvecs.values():
            if col.kind == Kind.SPARSE:
                out["sparse"] = out.get("sparse", 0) + int(col.index.stats()["nbytes"])
            else:
                out["multivectors"] = out.get("multivectors", 0) + int(col.tokens.nbytes)
        return out

    # -------------------------------------------------------------- writes
    def _encode_keywords(self, name: str, strings, present: Optional[np.ndarray],
                         enc: Optional[Encoded] = None) -> np.ndarray:
        """int32 codes of a batch of keywords (-1 where absent); new keywords join the dictionary.
        The batch's distinct values are found in one native pass over its UTF-8 bytes (one
        dictionary lookup per distinct value, not per row)."""
        codes = self.kw_codes[name]
        dictionary = self.kw_dictionary[name]
        values = strings.tolist() if isinstance(strings, np.ndarray) else list(strings)
        values = with_missing(values, present)
        enc = encode_strings(values) if enc is None or (present is not None and not present.all()) else enc
        if enc is not None:
            group, first, _ = enc.grouped()
            distinct = [values[i] for i in first.tolist()]
            new = [s for s in distinct if s not in codes]
            codes.update(zip(new, range(len(dictionary), len(dictionary) + len(new))))
            dictionary.extend(new)
            table = np.fromiter(map(codes.__getitem__, distinct), dtype=np.int32, count=len(distinct))
            return np.where(group >= 0, table[np.maximum(group, 0)] if len(table) else -1, -1).astype(np.int32)
        new = [s for s in dict.fromkeys(values) if s not in codes and s is not None]
        codes.update(zip(new, range(len(dictionary), len(dictionary) + len(new))))
        dictionary.extend(new)
        return np.fromiter(map(codes.get, values, repeat(-1)), dtype=np.int32, count=len(values))

    def _encode_extras(self, rows: list) -> list:
        dump = self.extra_adapter.dump_json
        return [dump(row) for row in rows]

    def upsert(self, batch: Batch, slots: Optional[np.ndarray] = None) -> np.ndarray:
        """Writes a batch (ids unique within it); returns the slot of each document.

        Existing ids are overwritten in place (they keep their position); new ids
        take a free slot (reuse_slots) or are appended. `slots` forces the slots
        of new ids (restoring a snapshot). The caller holds the write lock."""
        n = len(batch)
        id_enc = batch.encoded.get("id")
        found = self.row_of.get_many(batch.ids, id_enc)
        fresh = np.flatnonzero(found < 0)
        slots_out = found.copy()
        if slots is not None:
            slots_out[fresh] = np.asarray(slots, dtype=np.int64)[fresh]
            top = int(slots_out.max()) + 1 if n else 0
        else:
            take = min(len(self.free), len(fresh)) if self.reuse_slots else 0
            reused = [heapq.heappop(self.free) for _ in range(take)]
            slots_out[fresh[:take]] = reused
            slots_out[fresh[take:]] = np.arange(self.n, self.n + len(fresh) - take)
            top = self.n + len(fresh) - take
        # encode before touching any state so a failure leaves nothing half-written
        encoded = {}
        for name, arr in batch.columns.items():
            if name in self.kw_codes:
                encoded[name] = self._encode_keywords(name, arr, batch.present.get(name), batch.encoded.get(name))
            elif name in self.values:
                encoded[name] = arr
        extras = None
        if self.extras is not None:
            extras = self._encode_extras(list(zip(*(batch.columns[k] for k in self.extra_names))))

        self._grow(max(top, self.n))
        for name, arr in encoded.items():
            self.values[name][slots_out] = arr
        for name, arr in batch.present.items():
            self.present[name][slots_out] = arr
        for name, col in self.dense.items():
            col.set(slots_out, batch.vecs[name], batch.norms2.get(name))
        for name, col in self.fieldvecs.items():
            col.set(slots_out, batch.columns[name])
        for name, col in self.strings.items():
            col.set(slots_out, batch.columns[name], batch.encoded.get(name))
        if extras is not None:
            self.extras.set(slots_out, extras)
        if len(fresh):
            new_slots = slots_out[fresh]
            new_ids = [batch.ids[i] for i in fresh.tolist()] if len(fresh) < n else batch.ids
            whole = id_enc if len(fresh) == n else None  # the batch's encoding holds every id
            self.ids.set(new_slots, new_ids, whole)
            self.row_of.add(new_ids, new_slots, whole.hashed() if whole is not None else None)
            self.seq[new_slots] = np.arange(self.next_seq, self.next_seq + len(new_slots))
            self.next_seq += len(new_slots)
            np.bitwise_or.at(self.live, new_slots >> 6,
                             np.left_shift(np.uint64(1), (new_slots & 63).astype(np.uint64)))
        self.n = max(self.n, top)
        self.n_live += len(fresh)
        return slots_out

    def slots_of(self, ids: list) -> np.ndarray:
        """Slot of each id, -1 where absent."""
        return self.row_of.get_many(ids)

    def delete(self, ids: list) -> np.ndarray:
        """Tombstones the rows of the given ids (unknown ids are ignored); returns the slots they
        had (before any compaction this call makes)."""
        arr = self.row_of.remove(ids)
        arr = arr[arr >= 0]
        if not len(arr):
            return arr
        mask = np.left_shift(np.uint64(1), (arr & 63).astype(np.uint64))
        np.bitwise_and.at(self.live, arr >> 6, ~mask)
        for col in self._string_columns():
            col.clear(arr)
        for col in self.fieldvecs.values():
            col.remove(arr)
        self.n_live -= len(arr)
        if self.reuse_slots:
            if len(arr) > 64:  # one heapify beats a push per slot for a large delete
                self.free.extend(arr.tolist())
                heapq.heapify(self.free)
            else:
                for s in arr.tolist():
                    heapq.heappush(self.free, s)
        elif self.n - self.n_live > max(_MIN_CAPACITY, self.n_live):
            self.compact()
        return arr

    def set_fields(self, slots, values: dict) -> None:
        """Partial update of rows (one slot or an array of them) to the same values: only the
        named columns are written, each with one vectorised store."""
        slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        n = len(slots)
        if n == 0:
            return
        for name, value in values.items():
            spec = self.schema.fields[name]
            if name in self.present:
                self.present[name][slots] = value is not None
            if spec.kind is Kind.VECTOR:
                col = self.dense[name]
                block = np.zeros((n, col.dim), dtype=np.float32)
                if value is not None:
                    block[:] = value
                col.set(slots, block)
            elif name in self.fieldvecs:
                self.fieldvecs[name].set(slots, [value] * n)
            elif spec.kind is Kind.TEXT:
                self.strings[name].set(slots, [value] * n)
            elif spec.kind is Kind.KEYWORD:
                arr = np.array([value], dtype=object)
                self.values[name][slots] = self._encode_keywords(name, arr, None)[0]
            elif name in self.values:
                if value is not None:
                    self.values[name][slots] = value
        if self.extras is not None and any(k in values for k in self.extra_names):
            rows = [list(self.extra_adapter.validate_json(raw)) for raw in self.extras.raw_many(slots)]
            for row in rows:  # the other unindexed fields differ per row
                for i, k in enumerate(self.extra_names):
                    if k in values:
                        row[i] = values[k]
            self.extras.set(slots, self._encode_extras([tuple(r) for r in rows]))

    def slots_matching(self, node: Node) -> np.ndarray:
        """The live slots matching a filter, ascending."""
        return K.bitset_to_indices(self.filter_bits(node), self.n)

    def compact(self) -> None:
        """Drops tombstoned rows, keeping insertion order."""
        self.compactions += 1
        keep = self.live_rows()
        m = len(keep)
        for name in self.values:
            self.values[name][:m] = self.values[name][keep]
        for name in self.present:
            self.present[name][:m] = self.present[name][keep]
        for col in self.dense.values():
            col.take(keep, m)
        for col in self.fieldvecs.values():
            col.renumber(keep, self.n)
        self.seq[:m] = self.seq[keep]
        for col in self._string_columns():
            col.take(keep, m)
        self.row_of.rebuild(np.arange(m))
        self.live[:] = 0
        full, rest = divmod(m, 64)
        self.live[:full] = np.uint64(0xFFFFFFFFFFFFFFFF)
        if rest:
            self.live[full] = np.uint64((1 << rest) - 1)
        self.n = m

    # ---------------------------------------------------------- documents
    def field_values(self, rows, names=None) -> dict:
        """name -> the Python values of the given rows (None where absent), for `names`
        (default: every field). The columns a document is built from."""
        rows = np.asarray(rows, dtype=np.int64)
        want = list(self.schema.fields) if names is None else list(names)
        out = {}
        extras = None
        for name in want:
            spec = self.schema.fields[name]
            if spec.kind is Kind.ID:
                out[name] = self.ids.get_many(rows)
                continue
            if spec.kind is Kind.VECTOR:
                values = row_vectors(self.dense[name].vectors[rows])
            elif name in self.fieldvecs:
                values = self.fieldvecs[name].values(rows)
            elif spec.kind is Kind.TEXT:
                values = self.strings[name].get_many(rows)
            elif spec.kind is Kind.KEYWORD:
                d = self.kw_dictionary[name]
                values = [d[c] if c >= 0 else None for c in self.values[name][rows].tolist()]
            elif spec.kind is Kind.OTHER:
                if extras is None:
                    load = self.extra_adapter.validate_json
                    extras = [load(raw) for raw in self.extras.raw_many(rows)]
                i = self.extra_names.index(name)
                out[name] = [e[i] for e in extras]
                continue
            else:
                values = python_values(spec.kind, self.values[name][rows])
            present = self.present.get(name)
            out[name] = with_missing(values, present[rows] if present is not None else None)
        return out

    def documents(self, rows) -> list:
        """The documents at these (live) rows, built from the columns."""
        return documents(self.schema, self.field_values(rows), len(rows))

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
        present = self.present.get(name)
        if spec.kind is Kind.SPARSE:  # `{}` is absent (API.md section 10): $exists asks for an entry
            present = self.fieldvecs[name].present_mask(self.n)
        return Column(
            kind=spec.kind,
            values=self.values.get(name),
            present=present,
            dictionary=self.kw_dictionary.get(name),
            codes=self.kw_codes.get(name),
        )

    def _id_bits(self, node: Node) -> np.ndarray:
        bits = np.zeros(max((self.n + 63) // 64, 1), dtype=np.uint64)
        if isinstance(node, In) or node.op == "$eq":
            wanted = list(node.values) if isinstance(node, In) else [node.value]
            arr = self.row_of.get_many([v for v in wanted if isinstance(v, str)])
            arr = arr[arr >= 0]
        else:  # string range over ids: rare, one pass over the ids
            pred = string_predicate(node.op, node.value)
            rows = self.live_rows()
            arr = rows[np.fromiter(map(pred, self.ids.get_many(rows)), dtype=bool, count=len(rows))]
        if len(arr):
            np.bitwise_or.at(bits, arr >> 6, np.left_shift(np.uint64(1), (arr & 63).astype(np.uint64)))
        return bits

    def _program(self, node: Node) -> list:
        return ProgramBuilder(K, self.column, self._id_bits).build(node)

    def filter_bits(self, node: Node) -> np.ndarray:
        """Bitset of the live rows matching a parsed filter (one native call)."""
        return K.filter_eval(self._program(node), self.n, self.live_bits())

    def vector_bits(self, node: Optional[Node], field: Optional[str] = None) -> Optional[np.ndarray]:
        """Rows a search of dense field `field` (None: the one) may return: live, with a vector
        in that field, matching the filter. None means every slot (no deletes, no filter)."""
        spec = self.schema.vectors.get(field) if field is not None else self.vec_spec
        optional_vec = spec is not None and spec.optional
        if node is None and not optional_vec and self.n_live == self.n:
            return None
        program = self._program(node if node is not None else MatchAll())
        if optional_vec:
            program.append((K.F_PRESENT, 0, 0, None, self.present[spec.name], 0, 0.0, None, None))
            program.append((K.F_AND, 0, 2, None, None, 0, 0.0, None, None))
        return K.filter_eval(program, self.n, self.live_bits())

    def vector_block(self, field: Optional[str] = None) -> np.ndarray:
        return self.column_of(field).block(self.n)

    def aux_block(self, field: Optional[str] = None) -> Optional[np.ndarray]:
        return self.column_of(field).aux_block(self.n)

    def has_vector(self, rows: np.ndarray, field: Optional[str] = None) -> Optional[np.ndarray]:
        """Whether each row holds a vector in `field`, or None when every row does (required)."""
        spec = self.column_of(field).spec
        if not spec.optional:
            return None
        return self.present[spec.name][np.asarray(rows, dtype=np.int64)] != 0

    # ------------------------------------------------------------ search
    def exact_search(self, queries: np.ndarray, limit: int, bits: Optional[np.ndarray],
                     field: Optional[str] = None) -> tuple:
        """(scores, rows) of the exact top-`limit` of each query row among the rows set in
        `bits` (None: every live row with a vector) for dense field `field` (None: the one);
        one native call for the whole batch."""
        if bits is None:
            bits = self.vector_bits(None, field)
        return self.column_of(field).exact_search(queries, self.n, limit, bits)

    def hits(self, rows: np.ndarray, scores: np.ndarray) -> list:
        """(ids, scores) per row of an (nq, k) search result, -1 padding (at the end) dropped."""
        rows = np.asarray(rows, dtype=np.int64).reshape(len(rows), -1)
        if scores.shape != rows.shape:
            raise ValueError("rows and scores differ in shape")
        if len(rows) == 1:  # one query (find): its hits end at its first -1
            row = rows[0]
            pad = np.flatnonzero(row < 0)
            c = int(pad[0]) if len(pad) else len(row)
            if c and int(row[:c].max()) >= self.n:
                raise ValueError(f"a slot is beyond the store ({self.n} rows)")
            return [(self.ids.get_many(row[:c]), scores[0, :c])]
        hit = np.cumprod(rows >= 0, axis=1).astype(bool)  # a row's hits end at its first -1
        if (rows[hit] >= self.n).any():
            raise ValueError(f"a slot is beyond the store ({self.n} rows)")
        counts = hit.sum(axis=1).tolist()
        ids = self.ids.get_many(rows[hit])
        out, at = [], 0
        for i, c in enumerate(counts):
            out.append((ids[at: at + c], scores[i, :c]))
            at += c
        return out

    def vector_scores(self, q: np.ndarray, rows: np.ndarray, field: Optional[str] = None) -> np.ndarray:
        """The user-facing similarity (API.md) of query q to the given rows on dense field
        `field` (None: the one), exact, in float64 (a row without a vector scores as the zero
        vector; callers that must tell use has_vector)."""
        return self.column_of(field).scores(q, rows)


def popcount(bits: np.ndarray) -> int:
    """How many rows a bitset selects."""
    return int(K.popcount(bits))
