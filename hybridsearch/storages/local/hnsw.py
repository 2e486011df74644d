"""storage="hnsw": the project's own mutable HNSW graph (kernels/hs_hnsw.c) over a ColumnStore.

Graph node ids are ColumnStore slots, so a filter bitset over the columns is
directly a bitset over the graph. Each dense vector field has a graph of its own, with its
own metric (API.md section 10). Slots of deleted documents are reused by
later inserts once the graph has repaired the links around them. Cosine
stores unit vectors and walks the graph with the inner product.
"""
from __future__ import annotations

import dataclasses
import math
import os
import threading
from typing import Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.engine import graph as G
from hybridsearch.engine.columns import ColumnStore, popcount
from hybridsearch.engine.exact import sum_squares
from hybridsearch.engine.fdegraph import CANDIDATES as FDE_CANDIDATES
from hybridsearch.engine.fdegraph import FdeGraph, fde_metric_ok
from hybridsearch.engine.find import vector_hits
from hybridsearch.engine.lexical import TextIndex
from hybridsearch.engine.rwlock import RWLock
from hybridsearch.errors import BackendError, ConfigError
from hybridsearch.query import planner
from hybridsearch.query.filters import Node
from hybridsearch.storages.config import (GraphConfig, boolean, check_lock_timeout, integer, number, one_of, option,
                                          path_or_none, StrPath)
from hybridsearch.storages.local.journaled import JournaledStorage


_BITS_CACHE = 32  # filters whose bitsets a collection keeps between writes


@dataclasses.dataclass(frozen=True)
class HnswConfig(GraphConfig):
    """Options of storage="hnsw"."""

    m: int = option(16, integer(2, 512), "links per node and layer (twice that on layer 0)")
    path: Optional[StrPath] = option(None, path_or_none, "directory of the collection's files; None keeps it in RAM")
    quantization: Optional[str] = option("auto", one_of("auto", None, "none", "int8", "rabitq1", "rabitq4"),
                                         '"int8" walks the graph on int8 codes (scores stay exact); "rabitq4" / '
                                         '"rabitq1" on 4-bit / 1-bit RaBitQ codes, the candidates rescored on '
                                         'float32; "auto": int8 for a new collection, what the files hold on '
                                         "reopen; None: the float32 vectors")
    rescore: float = option(G.HNSW_RESCORE_EPS, number(0),
                            "RaBitQ walks: eps0 of the error bound that picks the candidates rescored on "
                            "float32 (larger reads more rows; inf: every candidate the walk kept)")
    threads: Optional[int] = option(None, integer(1, allow_none=True), "insert threads (graph and text fields); None = every core")
    exact_below: float = option(0.02, number(0, 1), "planner: scan the matches below this selectivity...")
    exact_max: int = option(10000, integer(0), "...or when at most this many documents match")
    filter_first_below: float = option(0.0, number(0, 1), "planner: two-hop filtered walk below this selectivity")
    filter_ef: float = option(planner.WALK_EF, number(0, 100),
                              "planner: a filtered walk's beam is ef x this x (1 + 0.12 / selectivity); "
                              "below 1 trades recall for speed")
    visit_cost: float = option(planner.VISIT_COST, number(0, 1e6),
                               "planner: cost of one walked node in exact rows scored (higher: scan more)")
    seed: int = option(0x5EED, integer(0), "seed of the graph's level draws")
    read_only: bool = option(False, boolean, "with path: open without the writer's lock; writes refused")
    follow: bool = option(True, boolean, "read_only: apply the writer's new writes before each read; False keeps "
                                         "the view of the open until refresh()")
    lock_timeout: float = option(0, number(0, 86400), "with path: seconds a writer waits for another writer's "
                                                      "lock before BackendError; 0 refuses at once")
    vectors_on_disk: bool = option(False, boolean, "with path: the float32 vectors stay in a file, read only to "
                                                   "rescore; RAM holds the codes, the graph and the columns")

    def validate(self) -> None:
        if self.read_only and self.path is None:
            raise ConfigError("read_only=True needs path= (the collection to open)")
        if self.vectors_on_disk and self.path is None:
            raise ConfigError("vectors_on_disk=True needs path= (the directory whose disk holds the vectors)")
        if self.vectors_on_disk and self.quantization in (None, "none"):
            raise ConfigError("vectors_on_disk=True needs a quantized walk (quantization='int8', 'rabitq4', "
                              "'rabitq1' or 'auto'): "
                              "a walk on float32 vectors reads them all from disk")
        check_lock_timeout(self)


class HnswStorage(JournaledStorage):
    """Columns in RAM, one HNSW graph per dense vector field, optional files under `path`."""

    name = "hnsw"
    Config = HnswConfig
    named_vectors = True
    vector_kinds = frozenset({"sparse", "multi"})

    def __init__(self, schema, config: HnswConfig) -> None:
        super().__init__(schema, config)
        self.m, self.ef_construct, self.ef = config.m, config.ef_construct, config.ef
        self.exact_below, self.exact_max = config.exact_below, config.exact_max
        self.filter_first_below = config.filter_first_below
        self.filter_ef, self.visit_cost = config.filter_ef, config.visit_cost
        quant = config.quantization
        # int8 codes steer the walk and the candidates are re-scored on float32, so results
        # keep exact scores and recall; the walk reads 4x fewer bytes (1.3x hnswlib's QPS at 200k)
        self._quantization_auto = quant == "auto"
        self.quantization = "int8" if quant == "auto" else "none" if quant is None else quant
        self.threads = config.threads or os.cpu_count() or 1
        self.store = ColumnStore(schema, self.metrics, reuse_slots=True)
        self._keep_vectors_on_disk()
        self.dim = self.store.dim
        self.graphs = {name: self._new_graph(name) for name in schema.vectors}  # dense field -> graph
        self.lock = RWLock()
        self.text = TextIndex(schema, self.threads)
        self._init_writes()
        self.graph_writes = 0  # calls that changed the graph, for stats(); written under the write lock
        self._plans = threading.local()  # the last plan of each reading thread (readers share the lock)
        self._bits_cache: dict = {}  # filter -> (lock generation, bitset, matches), see _filter_bits
        # multi-vector field -> the graph over its documents' FDEs (candidates for exact MaxSim);
        # mapped from the snapshot when it holds one (then the log's writes follow it), else
        # built from the token stores once the files are read
        self.fde_graphs: dict = {}
        self.fde_graphs_built = 0  # FDE graphs built over documents at open (not mapped), for stats()
        if config.path is not None:
            self._open_files(config.path, config.read_only, config.lock_timeout)
            if config.vectors_on_disk and self.quantization == "none":  # "auto" took the files' float walk
                self.close()
                raise ConfigError(f"the graph under {config.path} was saved with quantization=None: "
                                  "vectors_on_disk=True needs a quantized walk (a walk on float32 vectors reads "
                                  "them all from disk); open it without vectors_on_disk")
        self._build_fde_graphs()

    def _keep_vectors_on_disk(self) -> None:
        """vectors_on_disk: every dense column's block goes to a file in the collection's directory
        (an absolute path: the first growth may come after a chdir)."""
        if self.config.vectors_on_disk and self.config.path is not None:
            for col in self.store.dense.values():
                col.keep_on_disk(os.path.abspath(self.config.path))

    def _drop_index(self) -> None:
        # the graphs may be views of the mapped snapshot (close() unmaps it)
        self.graphs, self.fde_graphs, self._bits_cache = {}, {}, {}

    def _build_fde_graphs(self) -> None:
        """A graph over the FDEs of every multi-vector field whose metric has one (ip, cosine)
        and that no snapshot gave, from the documents the store holds."""
        for name, spec in self.schema.multi.items():
            col = self.store.fieldvecs[name]
            if not fde_metric_ok(col.metric) or name in self.fde_graphs:
                continue
            fg = FdeGraph(spec.dim, col.metric, self.m, self.ef_construct, self.config.seed, self.threads)
            slots = col.tokens.slots()
            self.fde_graphs_built += bool(len(slots))
            self.snapshot_due |= bool(len(slots))
            fg.set(slots, [col.tokens.get(s) for s in slots.tolist()])
            self.fde_graphs[name] = fg

    def _fde_write(self, slots: np.ndarray, values: dict) -> None:
        """The FDE graphs follow a write of `values` (field -> per-slot values) to these slots."""
        for name, fg in self.fde_graphs.items():
            if name not in values:
                continue
            given = [i for i, v in enumerate(values[name]) if v is not None]
            absent = [i for i, v in enumerate(values[name]) if v is None]
            if absent:
                fg.remove(slots[absent])
            if given:
                fg.set(slots[given], [values[name][i] for i in given])

    def _new_graph(self, field: str):
        col = self.store.dense[field]
        graph = G.HnswGraph(col.dim, col.metric, self.m, self.ef_construct, self.config.seed, self.quantization)
        graph.set_rescore(self.config.rescore)
        return graph

    @property
    def graph(self):
        """The graph of the schema's one dense field (None without exactly one)."""
        spec = self.store.vec_spec
        return self.graphs[spec.name] if spec is not None else None

    # ------------------------------------------------ the graph in snapshots (journaled.py)
    # One dense field: the graph's own meta and arrays, as snapshots always held them. Several:
    # {"fields": {name: meta}} and each graph's arrays under "<name>/". A graph left out (empty
    # when saved) is built from the documents on open.
    # The FDE graphs ride along in either layout: {"fde_graphs": {name: meta}} in the meta and
    # their arrays under "fde/<name>/" (a snapshot without them, as older ones are, builds them).
    def _export_index(self) -> Optional[tuple]:
        exported = {}
        for name, graph in self.graphs.items():
            graph.repair(self.store.dense[name].vectors, self.threads)
            self.graph_writes += 1
            if graph.size:  # an empty graph exports without the arrays attach() requires
                exported[name] = graph.export()
        fde = {name: fg.export() for name, fg in self.fde_graphs.items() if fg.size}
        if not exported and not fde:
            return None
        if self.store.vec_spec is not None:
            meta, arrays = exported.get(self.store.vec_spec.name, ({}, {}))
            meta, arrays = dict(meta), dict(arrays)
        else:
            arrays = {f"{name}/{k}": v for name, (_, parts) in exported.items() for k, v in parts.items()}
            meta = {"fields": {name: gmeta for name, (gmeta, _) in exported.items()}}
        if fde:
            meta["fde_graphs"] = {name: fmeta for name, (fmeta, _) in fde.items()}
            arrays.update({f"fde/{name}/{k}": v for name, (_, parts) in fde.items() for k, v in parts.items()})
        return meta, arrays

    def _index_rows(self, rows: np.ndarray) -> None:
        for name in self.graphs:
            self._index_slots(name, self._vector_slots(rows, name))

    def _check_index(self, where: str) -> None:
        for name, graph in self.graphs.items():
            if graph.size != self._vector_count(name):
                raise BackendError(f"the graph of {name!r} in the snapshot under {where} does not match its documents")

    def _attach_fde(self, metas, arrays: dict, where: str) -> None:
        """The snapshot's FDE graphs, mapped (attached() checks them against the restored
        tokens). Structural damage is a BackendError, as anywhere in a snapshot: the checksums
        passed, so it is a writer's bug or a file from elsewhere, and the user should hear of it
        rather than wait for a rebuild that hides it. A sound graph saved for another metric or
        m, or whose encodings differ from what this process's encoder gives, is left out:
        _build_fde_graphs builds it from the tokens (stats()["fde_graphs_built"] counts it), and
        the dense graphs' own checks speak for a changed m."""
        if not isinstance(metas, dict) or not set(metas) <= set(self.schema.multi):
            raise BackendError(f"the snapshot under {where} is damaged: its FDE graphs do not match the "
                               "multi-vector fields")
        for name, meta in metas.items():
            col = self.store.fieldvecs[name]
            if not fde_metric_ok(col.metric):
                continue  # opened with l2: searched exhaustively, nothing to attach
            prefix = f"fde/{name}/"
            parts = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            try:
                fg = FdeGraph.attached(meta, parts, col.tokens, col.spec.dim, col.metric, self.m,
                                       self.ef_construct, self.config.seed, self.threads)
            except ValueError as e:
                raise BackendError(f"the snapshot under {where} is damaged: the FDE graph of {name!r}: {e}") from None
            if fg is not None:
                self.fde_graphs[name] = fg

    def _attach_index(self, gmeta: dict, arrays: dict, where: str) -> None:
        """The snapshot's graphs, mapped; with quantization "auto" in whichever form they were saved."""
        if isinstance(gmeta, dict) and "fde_graphs" in gmeta:
            gmeta = dict(gmeta)
            self._attach_fde(gmeta.pop("fde_graphs"), arrays, where)
            arrays = {k: v for k, v in arrays.items() if not k.startswith("fde/")}
            if not arrays and not gmeta.get("fields"):  # only FDE graphs: the dense ones were empty
                self._index_rows(self.store.live_rows())
                return
        if not self.graphs:
            super()._attach_index(gmeta, arrays, where)
        if self.store.vec_spec is not None:
            metas = {self.store.vec_spec.name: (gmeta, arrays)}
        else:
            fields = gmeta.get("fields") if isinstance(gmeta, dict) else None
            if not isinstance(fields, dict) or not set(fields) <= set(self.graphs):
                raise BackendError(f"the snapshot under {where} is damaged: its graphs do not match the vector fields")
            metas = {name: (fields[name], {k[len(name) + 1:]: v for k, v in arrays.items()
                                           if k.startswith(name + "/")}) for name in fields}
        saved_metrics = self.store.restored_metrics
        for name, (meta, parts) in metas.items():
            col = self.store.dense[name]
            was = saved_metrics.get(name)
            if was is not None and was != col.metric:
                raise BackendError(f"the graph of {name!r} under {where} was built with metric={was!r}; "
                                   f"open it with that metric")
            if not isinstance(meta, dict) or meta.get("m") != self.m:
                raise BackendError(f"the graph under {where} was built with m={meta.get('m') if isinstance(meta, dict) else None}; "
                                   "open it with that m")
            saved = G.quantization_of(meta)
            if saved is None:
                raise BackendError(f"the snapshot under {where} is damaged: its graph names no known quantization")
            if saved != self.quantization:
                if not self._quantization_auto:
                    raise BackendError(f"the graph under {where} was saved with quantization="
                                       f"{saved if saved != 'none' else None!r}; open it with that quantization "
                                       "(or 'auto')")
                self.quantization = saved
            self.graphs[name] = G.HnswGraph.attach(meta, parts, col.dim, col.metric, self.m, self.ef_construct,
                                                   self.quantization)
            self.graphs[name].set_rescore(self.config.rescore)
        rows = self.store.live_rows()
        for name in self.graphs:
            if name not in metas:  # saved empty: built (empty or not) from the documents
                self.graphs[name] = self._new_graph(name)
                self._index_slots(name, self._vector_slots(rows, name))

    index_metric_bound = True  # each graph was built for its field's metric

    def _adopt_index(self, old: "HnswStorage", plan) -> None:
        """Schema evolution: the graphs of the vector fields kept (the slots are the same), as
        they are; a vector field new to the collection starts with an empty graph; the FDE graphs
        are built again from the carried tokens (_build_fde_graphs)."""
        self.quantization = old.quantization
        self._keep_vectors_on_disk()  # the carried columns come from a store without files
        for name in self.graphs:
            self.graphs[name] = old.graphs[name] if name in old.graphs else self._new_graph(name)
            self.graphs[name].set_rescore(self.config.rescore)  # this open's option, not the old one's
        self.graph_writes += old.graph_writes

    def _vector_count(self, field: str) -> int:
        if not self.store.dense[field].spec.optional:
            return self.store.n_live
        bits = self.store.vector_bits(None, field)
        return popcount(bits) if bits is not None else self.store.n_live

    # -------------------------------------------------------------- writes
    def _vector_slots(self, slots: np.ndarray, field: str) -> np.ndarray:
        """The slots among `slots` whose document has a vector in `field`."""
        spec = self.store.dense[field].spec
        if not spec.optional or len(slots) == 0:
            return slots
        return slots[self.store.present[spec.name][slots] != 0]

    def _index_slots(self, field: str, slots: np.ndarray) -> None:
        if len(slots):
            self.graphs[field].add(self.store.dense[field].vectors, slots, self.threads)
            self.graph_writes += 1

    def _apply_upsert(self, batch: Batch) -> None:
        slots = self.store.upsert(batch)
        self._fde_write(slots, {name: batch.columns[name] for name in self.fde_graphs})
        if self.text:
            self.text.add(slots, batch.columns)
        for name, graph in self.graphs.items():
            with_vec = self._vector_slots(slots, name)
            if len(with_vec) != len(slots):
                gone = np.setdiff1d(slots, with_vec)
                graph.remove(self.store.dense[name].vectors, gone, self.threads)
                self.graph_writes += 1
            self._index_slots(name, with_vec)
        self.store.release_vectors()

    def _apply_delete(self, ids: list) -> int:
        st = self.store
        slots = st.delete(ids)
        if self.text:
            self.text.remove(slots)
        for fg in self.fde_graphs.values():
            fg.remove(slots)
        if len(slots):
            for name, graph in self.graphs.items():
                graph.remove(st.dense[name].vectors, slots, self.threads)
                self.graph_writes += 1
        st.release_vectors()
        return len(slots)

    def _apply_update(self, slots, values: dict) -> None:
        """A partial update of one slot or an array of them to the same values; only the graphs
        of the vector fields named change."""
        self.store.set_fields(slots, values)
        if self.text:
            self.text.update(slots, values)
        many = np.atleast_1d(np.asarray(slots, dtype=np.int64))
        self._fde_write(many, {name: [values[name]] * len(many) for name in self.fde_graphs if name in values})
        for name, graph in self.graphs.items():
            if name not in values:
                continue
            slots = np.atleast_1d(np.asarray(slots, dtype=np.int64))
            vectors = self.store.dense[name].vectors
            if values[name] is None:
                graph.remove(vectors, slots, self.threads)
            else:
                graph.add(vectors, slots, self.threads)  # re-links the nodes
            self.graph_writes += 1
        self.store.release_vectors()

    # --------------------------------------------------------------- reads
    def last_plan(self) -> Optional[planner.Plan]:
        """The plan of this thread's most recent vector search (for tests and benchmarks)."""
        return getattr(self._plans, "last", None)

    def _filter_bits(self, node: Node, field: Optional[str] = None) -> tuple:
        """(bitset, matches) of a filter over the vector rows; the caller holds the read lock.

        Kept per filter until the next write: evaluating `bucket < t` over 200k rows costs
        ~50 us, as much as a whole graph walk, and applications repeat their filters (a tenant,
        a category). hnswlib's callable is likewise built once by its caller."""
        gen = self.lock.generation
        key = (node, field)  # a field's rows without a vector are left out: its own bitset
        try:
            hit = self._bits_cache.get(key)
        except TypeError:  # a filter value that is not hashable: evaluate it every time
            bits = self.store.vector_bits(node, field)
            return bits, popcount(bits)
        if hit is not None and hit[0] == gen:
            return hit[1], hit[2]
        bits = self.store.vector_bits(node, field)
        matches = popcount(bits)
        if len(self._bits_cache) >= _BITS_CACHE:
            self._bits_cache.clear()  # a write empties it anyway; bounded for many distinct filters
        self._bits_cache[key] = (gen, bits, matches)
        return bits, matches

    def _find_natively(self, query, k: int, ef: Optional[int], exact: bool) -> Optional[tuple]:
        """The walk (or, with exact=True or an empty graph, the exact scan) in one native call;
        the plan is recorded as _vectors records it. The caller holds the read lock."""
        graph = self.graph
        # the codes' exact scan, as _vectors plans it, when the graph holds every live row
        scan = exact and self.quantization != "none" and graph.size == self.store.n_live
        hits = vector_hits(query, self.store, k, None if exact and not scan else graph, ef or self.ef, scan)
        if hits is None:
            return None
        ids, scores, walk_ef = hits
        if walk_ef:
            self._plans.last = planner.graph_plan(walk_ef)
        elif k:
            nodes = graph.size
            self._plans.last = planner.plan(nodes, nodes, k, min(ef or self.ef, max(nodes, 1)), exact=True)
        return ids, scores

    def _vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                 ef: Optional[int], field: Optional[str] = None) -> tuple:
        """(scores, rows) per query on dense field `field` (None: the one), planned from the
        filter's selectivity; the caller holds the lock."""
        col = self.store.column_of(field)
        graph = self.graphs[col.name]
        nodes = graph.size
        ef = min(ef or self.ef, max(nodes, 1))  # a wider beam than the graph allocates for nothing
        if node is None:
            bits, matches = None, nodes
        else:
            bits, matches = self._filter_bits(node, field)
        if node is None and not exact and nodes:  # the common case, without the planner's cost
            p = planner.graph_plan(max(ef, limit))
        else:
            p = planner.plan(matches, nodes, limit, ef, exact=exact,
                             exact_below=self.exact_below, exact_max=self.exact_max,
                             filter_first_below=self.filter_first_below,
                             walk_share=self.filter_ef, visit_cost=self.visit_cost,
                             filtered=node is not None)
        self._plans.last = p
        q = queries
        if col.metric == "cosine" and len(q) == 1:  # one query (find): no axis reduction
            q = np.ascontiguousarray(q / np.float32(max(math.sqrt(sum_squares(q[0])), 1e-30)), dtype=np.float32)
        elif col.metric == "cosine":
            norms = np.linalg.norm(q, axis=1, keepdims=True)
            q = np.ascontiguousarray(q / np.maximum(norms, 1e-30), dtype=np.float32)
        if p.strategy == planner.EXACT:
            # on int8 codes, re-scoring only the rows their error bound leaves in doubt: the
            # float scan's answer from a quarter of its bytes (None: a row is not a node yet)
            # unfiltered, every row with a vector is allowed (the scan checks each is a node;
            # None: every live row, which the graph must then hold whole)
            allowed = bits if bits is not None else self.store.vector_bits(None, field)
            whole = allowed is not None or nodes == self.store.n_live
            found = graph.scan(col.vectors, q, limit, allowed) if self.quantization != "none" and nodes and whole else None
            scores, rows = found if found is not None else self.store.exact_search(queries, limit, bits, field)
        else:
            mode = G.TWO_HOP if p.strategy == planner.FILTER_FIRST else G.PLAIN
            scores, rows = graph.search(col.vectors, q, limit, p.ef, bits, mode)
            want = min(limit, matches)
            last = rows[:, want - 1]  # hits come first, -1 padding after them
            short = np.flatnonzero(last < 0) if len(last) > 1 or last[0] < 0 else ()
            if len(short):  # the walk could not reach enough matches: scan them
                es, er = self.store.exact_search(np.ascontiguousarray(queries[short]), limit, bits, field)
                scores[short], rows[short] = es, er
        return scores, rows

    def _fieldvec_search(self, col, queries, limit, node, exact, ef) -> tuple:
        """A multi-vector field with an FDE graph: candidates from the graph, at least
        FDE_CANDIDATES of them, rescored by exact MaxSim (docs/storages/hnsw.md states the
        recall); exhaustive with exact=True, for a field of at most `exact_max` documents, and
        for a query whose walk finds fewer candidates than the page needs. Sparse fields and
        l2 multi-vector fields are always exact (the inverted index is the sparse index)."""
        fg = self.fde_graphs.get(col.spec.name)
        if fg is None or exact or fg.size <= self.exact_max:
            return super()._fieldvec_search(col, queries, limit, node, exact, ef)
        bits = self._prefilter_bits(node, False)
        c = max(limit, FDE_CANDIDATES)
        scores = np.full((len(queries), limit), -np.inf, dtype=np.float32)
        rows = np.full((len(queries), limit), -1, dtype=np.int64)
        # the batch's encodings and walks in one native call; the exact rescoring is one
        # native call per query (TokenStore.maxsim_of takes one query block)
        walked = fg.candidates_batch(queries, c, max(ef or self.ef, c), bits)
        for i, Q in enumerate(queries):
            found = walked[i][walked[i] >= 0]
            if len(found) < c:  # the walk could not reach enough matches: scan them
                s, r = col.search([Q], limit, bits)
                scores[i], rows[i] = s[0], r[0]
                continue
            exact_scores = col.scores(Q, found)
            order = np.lexsort((found, -exact_scores))[:limit]  # best first, ties to the lower slot
            scores[i, :len(order)], rows[i, :len(order)] = exact_scores[order], found[order]
        return scores, rows

    # ------------------------------------------------------------ lifecycle
    def stats(self) -> dict:
        """Adds the graph: nodes, its bytes (links, and int8 codes when quantized), the float32
        vector block's bytes, the quantization in use and this thread's last plan; and
        "graph_pending" (removed nodes whose neighbours' links are not repaired yet: a few
        deletes wait for the next insert, a large one repairs at once), "graph_writes" (calls
        that changed the graph since the collection was opened: inserts, removals, repairs;
        a write of scalar fields makes none), "slots" (column rows, live or free: a deleted
        document's slot is reused by a later insert, so re-adding does not grow this) and
        "fde_graph_nodes" (multi-vector field -> nodes of the graph over its FDEs),
        "fde_graphs_built" (FDE graphs built over the documents' tokens when the collection
        opened, rather than mapped from the snapshot: 0 after a reopen from a snapshot, unless
        the saved graph was for another metric or m or its encodings no longer match) and, in "bytes", "fde_graph" (their links and encodings)."""
        base = super().stats()  # takes the read lock itself: not nested, a waiting writer would block it
        with self.lock.read():
            plan = self.last_plan()
            graphs = list(self.graphs.values())
            graph_bytes = sum(g.nbytes for g in graphs)
            return {**base, "quantization": self.quantization,
                    "graph_nodes": sum(g.size for g in graphs),
                    "graph_bytes": graph_bytes,
                    "graph_pending": sum(g.pending for g in graphs),
                    "graph_writes": self.graph_writes,
                    # multi-vector field -> nodes of its FDE graph (the documents holding it)
                    "fde_graph_nodes": {name: fg.size for name, fg in self.fde_graphs.items()},
                    "fde_graphs_built": self.fde_graphs_built,
                    "fsyncs": self._fsyncs(),
                    "slots": int(self.store.n),
                    "bytes": {**base.pop("bytes"), "graph": graph_bytes,
                              **({"fde_graph": sum(fg.nbytes for fg in self.fde_graphs.values())}
                                 if self.fde_graphs else {})},
                    "vector_bytes": int(sum(c.vectors.nbytes for c in self.store.dense.values())),
                    "vectors_on_disk": self.config.vectors_on_disk,
                    "last_plan": None if plan is None else {"strategy": plan.strategy, "ef": plan.ef,
                                                            "selectivity": plan.selectivity}}
