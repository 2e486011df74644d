"""The Storage interface every storage implements: batch-first private methods."""
from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import nullcontext
from typing import Any, ContextManager, Iterator, Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.document import Schema
from hybridsearch.errors import ConfigError, UnsupportedError
from hybridsearch.query.candidates import Candidates, ScoredPool
from hybridsearch.query.filters import MatchAll, Node
from hybridsearch.storages.config import StorageConfig


def exact_scores(X: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    """API.md's scores of the rows of X for query q, in float64: cosine similarity (0 for a zero
    vector), inner product, or minus the euclidean distance. Wrapped libraries and remote engines
    report transformed distances; their storages recompute the scores with this."""
    X = np.asarray(X, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if metric == "ip":
        return X @ q
    if metric == "l2":
        return -np.linalg.norm(X - q, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num((X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q)), nan=0.0)


def rank_exactly(X: np.ndarray, q: np.ndarray, metric: str, limit: int) -> tuple:
    """(order, scores float32): the rows of X best first by their exact score for q (ties in
    row order), cut to `limit`. Storages that get candidates from elsewhere rank them with this."""
    s = exact_scores(X, q, metric)
    order = np.argsort(-s, kind="stable")[:limit]
    return order, s[order].astype(np.float32)


_MATCH_ALL = MatchAll()


def resolve_metrics(schema: Schema, metric) -> dict:
    """Dense and multi-vector field -> metric from the `metric=` option: one string for every
    field, or a dict field -> metric (fields not named: "cosine"). A dict naming a field that is
    not such a field of the schema is a ConfigError naming them (sparse fields always score by
    dot product: they take no metric)."""
    fields = [*schema.vectors, *schema.multi]
    if isinstance(metric, str):
        return {name: metric for name in fields}
    unknown = [k for k in metric if k not in fields]
    if unknown:
        raise ConfigError(f"metric names {unknown[0]!r}, which is not a dense or multi-vector field of "
                          f"{schema.name}; its fields taking a metric: {', '.join(fields) or '(none)'}")
    return {name: metric.get(name, "cosine") for name in fields}


class Storage(ABC):
    """A storage. DocumentArray validates and converts; a storage stores and searches.

    `Config` is the storage's options dataclass (storages/config.py); DocumentArray parses
    the user's keyword arguments with `Config.parse` and passes the result in.
    """

    name: str = ""
    Config: type = StorageConfig
    # options of API.md section 8 the storage answers itself ("linear", "text_fields") and of the
    # text query ("syntax": phrases, +/-, prefix*; "operator": operator="and"); the array refuses
    # the others with UnsupportedError rather than pass what a storage ignores
    query_options: frozenset = frozenset()
    # whether the storage holds several dense vector fields (API.md section 10); one that does
    # not refuses such a schema at open, and is asked for its one field only (field=None)
    named_vectors: bool = False
    # the field kinds of API.md section 10 beyond dense vectors that the storage holds
    # ("sparse": hs.SparseVector, "multi": hs.MultiVector[d]); one lacking a kind refuses it at open
    vector_kinds: frozenset = frozenset()
    # whether a remote collection (url= / hosts=) answers mode="create" / "open": the storage asks its
    # engine whether the index exists and calls storages/open_mode.settle before creating anything;
    # `remote_modes_why` is why a storage that cannot tell refuses those modes (UnsupportedError)
    remote_modes: bool = False
    remote_modes_why: str = "it cannot tell whether a remote collection exists"

    def __init__(self, schema: Schema, config: StorageConfig) -> None:
        self.schema = schema
        self.config = config
        if len(schema.vectors) > 1 and not self.named_vectors:
            raise UnsupportedError(
                f"storage {self.name!r} holds one dense vector field for now; {schema.name} has "
                f"{len(schema.vectors)} ({', '.join(schema.vectors)}): use storage memory, hnsw or sqlite")
        for kind, fields, what in (("sparse", schema.sparse, "hs.SparseVector"),
                                   ("multi", schema.multi, "hs.MultiVector")):
            if fields and kind not in self.vector_kinds:
                raise UnsupportedError(
                    f"storage {self.name!r} does not hold {what} fields "
                    f"({schema.name}.{next(iter(fields))} is one)")
        # dense field -> metric; `metric` is the one of a single field (or the option's string)
        self.metrics = resolve_metrics(schema, config.metric)
        self.metric = (self.metrics[schema.vector.name] if schema.vector is not None
                       else config.metric if isinstance(config.metric, str) else "cosine")

    # writes: each call is one batch and is atomic
    @abstractmethod
    def upsert(self, batch: Batch) -> None:
        """Inserts or overwrites the batch's documents."""

    @abstractmethod
    def delete(self, ids: list) -> int:
        """Deletes the ids that exist; returns how many."""

    @abstractmethod
    def update_fields(self, id: str, values: dict) -> None:
        """Partial update: writes only the named (validated) fields; KeyError if the id is absent."""

    # reads
    @abstractmethod
    def count(self) -> int: ...

    @abstractmethod
    def contains(self, id: str) -> bool: ...

    @abstractmethod
    def get(self, ids: list) -> list:
        """The stored documents of the ids (None where absent), new objects the caller may keep."""

    @abstractmethod
    def iter_ids(self) -> Iterator[str]:
        """Ids in insertion order."""

    @abstractmethod
    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        """Top-`limit` per query row -> list of (ids, scores float32, docs). docs is None when the
        documents are to be read by id when a user asks for them (`get`), which columnar storages
        do; storages whose search already returns documents give them (new objects). A storage
        with `named_vectors` also takes `field=` (the dense field to search; None: the one)."""

    def find_vector(self, query: Any, limit: int, ef: Optional[int], exact: bool) -> Optional[tuple]:
        """The plain vector find (one query; no filter, text, offset or min_score) in one call ->
        (ids, scores float32), best first; or None when this storage or this query takes the
        general path (search_vectors), which also checks the query and refuses a bad one. The
        caller has checked `limit` (>= 1) and `ef`, not the query. This fallback: always None."""
        return None

    @abstractmethod
    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        """Matching documents in insertion order -> (ids, docs or None, as for search_vectors)."""

    def count_matches(self, node: Optional[Node], text: Optional[str]) -> int:
        """Documents matching `node` (None: all) and, with `text`, holding a query term. This
        fallback counts what the searches return; storages count without fetching."""
        if text is None:
            return len(self.search_filter(node, None)[0]) if node is not None else self.count()
        return len(self._text_hits(text, node)[0])

    def facets(self, field: str, node: Optional[Node], text: Optional[str], limit: int,
               ranges: Optional[list]) -> list:
        """Counts per value (or per range) of `field` over the matching documents. This fallback
        reads the matching documents; storages count over their columns or aggregate natively."""
        values = [getattr(d, field) for d in self._matching_docs(node, text)]
        values = [v for v in values if v is not None]
        if ranges is not None:
            return [((lo, hi), sum(1 for v in values if (lo is None or v >= lo) and (hi is None or v < hi)))
                    for lo, hi in ranges]
        counts: dict = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        return sorted(counts.items(), key=lambda p: (-p[1], p[0]))[:limit]

    def search_sorted(self, node: Optional[Node], text: Optional[str], keys: list,
                      limit: Optional[int]) -> tuple:
        """Every match ordered by the sort keys -> (ids, scores, docs, total). This fallback sorts
        the matching documents; storages sort over their columns or natively."""
        if text is None:
            ids, _ = self.search_filter(node if node is not None else _MATCH_ALL, None)
            scored = list(zip(ids, [0.0] * len(ids)))
        else:
            ids, scores, _ = self._text_hits(text, node)
            scored = list(zip(ids, (float(s) for s in scores)))
        docs = dict(zip([i for i, _ in scored], self.get([i for i, _ in scored])))
        # a document deleted between the search and the read (a writer in another thread) is
        # left out, as if the delete had come first: the calls above are separate reads
        scored = [p for p in scored if docs[p[0]] is not None]
        position = {i: n for n, i in enumerate(self.iter_ids())}
        rank = sorted(scored, key=lambda p: (-p[1], position.get(p[0], 0)))
        for field, direction in reversed(keys):  # stable sorts, least significant key first
            have = [p for p in rank if getattr(docs[p[0]], field) is not None]
            none = [p for p in rank if getattr(docs[p[0]], field) is None]
            have.sort(key=lambda p: getattr(docs[p[0]], field), reverse=direction == "desc")
            rank = have + none
        rank = rank[:limit]
        return ([i for i, _ in rank], np.array([s for _, s in rank], dtype=np.float32),
                [docs[i] for i, _ in rank], len(scored))

    def _matching_docs(self, node: Optional[Node], text: Optional[str]) -> list:
        if text is None:
            ids, docs = self.search_filter(node if node is not None else _MATCH_ALL, None)
        else:
            ids, _, docs = self._text_hits(text, node)
        return [d for d in (docs if docs is not None else self.get(list(ids))) if d is not None]

    def _text_hits(self, text, node: Optional[Node]) -> tuple:
        """(ids, BM25 scores, docs or None) of every document matching `node` that `text` matches,
        for the fallbacks above (text_matches, in one read)."""
        with self.reading():
            found = self.text_matches(text, node)
            ids, docs = self.hits_of(found.keys, found.docs)
        return list(ids), found.scores, docs

    def delete_where(self, node: Node) -> int:
        """Deletes every document matching `node`; returns how many. This fallback deletes the
        ids the filter finds in one delete call; storages that can, delete by the condition."""
        ids = self.search_filter(node, None)[0]
        return self.delete(list(ids)) if ids else 0

    def update_where(self, node: Node, values: dict) -> int:
        """Sets the (validated) values on every document matching `node`; returns how many.
        This fallback updates the ids the filter finds one by one: one write per document, so
        not atomic. API.md promises one atomic write, so a storage overrides it (the columnar
        ones under their writer lock, annlite with one intent, sqlite with one transaction)."""
        ids = self.search_filter(node, None)[0]
        done = 0
        for id_ in ids:
            try:
                self.update_fields(id_, values)
                done += 1
            except KeyError:  # deleted meanwhile
                pass
        return done

    def column_values(self, names: list) -> dict:
        """name -> per-row values (None where absent) of every document, in insertion order; a
        storage may give a numpy array for a column without missing values. This fallback reads
        the documents in batches; columnar storages read their columns."""
        out = {name: [] for name in names}
        ids = list(self.iter_ids())
        for start in range(0, len(ids), 1024):
            for doc in self.get(ids[start:start + 1024]):
                if doc is not None:
                    for name in names:
                        out[name].append(getattr(doc, name))
        return out

    # ------------------------------------------------------- retrieval primitives
    # query/executor.py answers every vector, text and hybrid find from these: the storage
    # retrieves and scores, the executor alone unions the lists, fuses, breaks ties, pages and
    # applies min_score. Keys (Candidates.keys) are int64 rows on column-store storages and str
    # ids elsewhere; a key is valid only inside the `reading()` it was returned in.
    def reading(self) -> ContextManager:
        """A context in which one find calls the primitives below and reads one state of the
        collection: keys keep naming the same documents, no write lands between the calls.
        Column-store storages hold their read lock (the primitives then take no lock of their
        own); storages keyed by id need none (this default)."""
        return nullcontext()

    def vector_top(self, query: np.ndarray, k: int, node: Optional[Node], exact: bool,
                   ef: Optional[int]) -> Candidates:
        """The vector top-`k` of `query` ((1, d) float32, checked by the caller), best first:
        pre-filtered (only documents matching `node`, None: all, that hold a vector), at most
        min(k, such documents). `exact`: brute force; else the storage's index (an ANN list,
        `ef` overriding its search-time beam). Scores are API.md's similarity (cosine, ip, or
        minus the l2 distance), float32; ties of an exact list to the earlier-inserted document.
        A storage with `named_vectors` also takes `field=`: the dense field searched (None: the
        schema's one); the executor passes it only to such storages."""
        raise UnsupportedError(f"storage {self.name!r} does not answer vector searches through the executor yet")

    def text_top(self, text, k: int, node: Optional[Node]) -> Candidates:
        """The lexical top-`k` of `text` (a str or query.text.TextQuery) by best-field BM25, best
        first, among the documents matching `node` (None: all) that the query matches: exactly
        the top-k of exhaustive evaluation; equal scores to the earlier-inserted document."""
        raise self.no_text_search()

    def text_matches(self, text, node: Optional[Node]) -> Candidates:
        """Every document matching `node` that `text` matches, each with its BM25 (the same score
        text_top gives it), in any order (one native call where the storage can: exact=True
        hybrid scores every match)."""
        raise self.no_text_search()

    def scores_of(self, keys: np.ndarray, part: str, query) -> np.ndarray:
        """Each key's exact score on one list, float32, aligned with `keys` (keys of this read):
        part "text", `query` the text: best-field BM25, 0 where the document holds no query term;
        part "vector", `query` (1, d) float32: the exact similarity (a document without a vector
        scores as the zero vector: 0 for cosine and ip, -|q| for l2; a storage with
        `named_vectors` takes `field=` and gives NaN there instead, which the executor fuses as
        0). Never filtered: the keys came from pre-filtered lists."""
        if part == "text":
            raise self.no_text_search()
        raise UnsupportedError(f"storage {self.name!r} does not score given documents yet")

    def hybrid_lists(self, text, k: int, every_match: bool, query: np.ndarray, node: Optional[Node], exact: bool,
                     ef: Optional[int], **field) -> tuple:
        """(lexical, vector) Candidates of a text + one vector list find: `text_matches` with
        `every_match`, else `text_top` (k), then `vector_top` (k) of `query` (`field=` as there,
        for storages with `named_vectors`), the lexical side first (a storage without a lexical
        engine refuses before any search). An engine that takes both lists in one request
        (Elasticsearch's _msearch) overrides it."""
        lex = self.text_matches(text, node) if every_match else self.text_top(text, k, node)
        return lex, self.vector_top(query, k, node, exact, ef, **field)

    def scored_pool(self, plan) -> Optional[ScoredPool]:
        """An engine's own answer to a hybrid "sum" or "linear" plan (query/plan.py): its
        candidates with both parts, which query/executor.py then fuses, ranks and pages; None
        (this default) to have the executor build them from the primitives above. A storage
        answers here only where its engine's query gives API.md's candidates (Vespa's rank
        profiles)."""
        return None

    def hits_of(self, keys: np.ndarray, docs: Optional[list] = None) -> tuple:
        """(ids list[str], docs or None) of keys of this read, aligned. `docs` (aligned, None where
        unknown) are documents the lists already brought; a storage returns the documents it has
        at hand (new objects) or None to have them read by id when a user asks (Results)."""
        return [str(k) for k in keys.tolist()], (docs if docs is not None and all(d is not None for d in docs)
                                                 else None)

    def no_text_search(self) -> UnsupportedError:
        """The refusal of every text option where the storage has no lexical engine."""
        return UnsupportedError(
            f"text search is not available on storage {self.name!r}: this storage has no lexical engine"
        )

    def backup(self, dest) -> dict:
        """Copies the collection, while writes go on, to `dest` (a path that does not exist yet),
        where it opens as a collection (API.md, "Backup and restore"). This default: refused."""
        raise UnsupportedError(f"storage {self.name!r} has no backup: use its engine's own snapshots, "
                               "or copy the documents out (to_columns / iteration) into a new collection")

    def stats(self) -> dict:
        """What this collection holds and how it is configured, for sizing and debugging
        (DocumentArray.stats). Storages add their own keys to these."""
        return {"storage": self.name, "documents": self.count(), **self.config.as_public_dict()}

    def refresh(self) -> int:
        """Applies the writes another process's writer has acknowledged since this storage last
        looked -> how many writes were applied. A writer, and a storage that always answers from
        its engine's current state (the remote ones), has nothing to apply: 0."""
        return 0

    def catch_up(self) -> None:
        """refresh() when the files changed since it last ran, at the cost of a look at them
        otherwise (a follower runs it before every read: API.md section 2, follow=)."""

    @property
    def writer_path(self):
        """The path whose writer's lock this storage holds (None: no such lock, or not held):
        an unclosed DocumentArray on it is reported by a ResourceWarning."""
        return None

    def release(self) -> None:
        """What a DocumentArray dropped without close() runs (from its finalizer): give back the
        files and the writer's lock at once, taking no lock of the storage (a finalizer may run
        in any thread) and writing nothing more (every acknowledged write is durable already).
        Storages that hold no such thing do nothing."""

    def close(self) -> None:
        """Releases resources; persistent storages flush here."""
