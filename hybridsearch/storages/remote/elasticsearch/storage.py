"""storage="elasticsearch" (and, through opensearch.py, "opensearch"): the DocumentArray API over a
real search engine.

One index per collection. The mapping comes from the schema (query.properties); the vector field is
`dense_vector` with HNSW `index_options` on Elasticsearch and a Lucene-engine `knn_vector` on
OpenSearch. What the two engines share lives in `SearchEngineStorage`; the subclasses differ in the
client, the vector mapping, the vector query and the error types. What every remote storage shares
(retries, redaction, rollback, document <-> fields, exact rescoring) lives in ../base.py.

Semantics of API.md kept here:
- writes are visible on return (`refresh="wait_for"` by default, or `True`);
- `extend` goes through the client's `streaming_bulk` helper in chunks (documents
  refused with 429 resent with backoff); when any document fails, or the
  connection is lost half-way, the documents of the batch that were (or may have
  been) written are deleted and the ones they overwrote restored, and
  `hs.BackendError` lists the failures: nothing is reported as written that was
  not (a crash in the middle of that repair can still leave a partial batch: the
  engine has no multi-document transaction); `delete` restores the same way;
- insertion order: an `hs_seq` field, kept by upserts of an existing id (ties
  between several writers broken by id);
- several query vectors travel in one `_msearch` request;
- scores: vector scores are recomputed from the hits' stored vectors as
  cosine / inner product / -euclidean (the engines report transformed
  similarities); lexical scores are the engine's BM25 of the best field
  (`multi_match` `best_fields`; Elasticsearch's divided by k1 + 1 = 2.2, see
  `ElasticsearchStorage.bm25_scale`);
- text and hybrid finds run on the retrieval primitives (storages/base.py) and
  query/executor.py fuses them: the lexical top list, every lexical match
  (exact=True), the knn list ranked by exact score, and for the union the BM25 of
  given ids (the lexical query with an `ids` filter, asked only for vector hits
  no complete lexical list scored) and the stored vectors of lexical hits (from
  their `_source`). Neither engine's native hybrid gives API.md's answer: the
  bool + knn query sums the engine's scores over every lexical match, and
  Elasticsearch's rrf retriever breaks ties in the engine's document order, not
  insertion order, and reports no part scores;
- API.md section 8 and the text query syntax: `text_fields` weights, operator="and",
  phrases, +required, -excluded and prefix* are built into the lexical query by
  lexical.py, so every mode with text (find, hybrid, count, facets, sort) runs them;
- API.md section 10 (fields.py, vectors.py): any number of dense fields, each its own
  dense_vector / knn_vector with its metric; sparse fields searched through the engine's
  reduced-precision dot product (Elasticsearch's sparse_vector, OpenSearch's rank_features)
  and rescored exactly from the weights kept in _source; multi-vector fields kept in _source and
  scored by exact MaxSim over every matching document; every list pre-filtered;
- a filtered vector search is pre-filtered (`knn.filter`); when the engine
  returns fewer than min(limit, matches) hits, the query is answered exactly
  by scoring every matching document's vector here;
- errors: connection failures, timeouts and 4xx/5xx become `hs.BackendError`
  with status and reason; 429 and 503 are retried with exponential backoff;
  credentials are redacted from every message and never part of a repr;
- API.md section 7 on the engine: counts are `_count`, facets one terms / range
  aggregation (a composite one where several shards could make a terms count
  inexact), sorted finds the engine's `sort` paged with search_after, writes by
  condition `_delete_by_query` / `_update_by_query` (conflicts=proceed, refresh,
  repeated over conflicts; not transactional: docs/storages/elasticsearch.md);
  the text part of each is the lexical query of find(text=).
"""
from __future__ import annotations

import logging
from typing import Iterator, Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.errors import BackendError, ConfigError
from hybridsearch.query.candidates import Candidates
from hybridsearch.query.filters import MatchAll, Node
from hybridsearch.storages.remote.base import MAX_BACKOFF, RETRY_STATUS, SEQ_FIELD, RemoteStorage
from hybridsearch.storages.remote.elasticsearch import answers as A
from hybridsearch.storages.remote.elasticsearch import fields as V
from hybridsearch.storages.remote.elasticsearch import lexical as L
from hybridsearch.storages.remote.elasticsearch import query as Q
from hybridsearch.storages.remote.elasticsearch.config import SearchEngineConfig, secret_strings
from hybridsearch.storages.remote.elasticsearch.vectors import MAX_CANDIDATES, VectorLists

log = logging.getLogger("hybridsearch")

PAGE = 5000             # documents per page when listing (engines cap one page at 10,000)
MSEARCH = 100           # searches per _msearch request
FACET_TERMS = 10000     # facets(limit=) up to this ask a terms aggregation; larger ones page every value
FACET_PAGE = 1000       # values per composite-aggregation page (well below search.max_buckets)
UPDATE_TRIES = 5        # reads and conditional writes of one update before another client's writes win


class _NoByQuery(Exception):
    """The node has no _delete_by_query / _update_by_query endpoint (no reindex module)."""


class SearchEngineStorage(VectorLists, RemoteStorage):
    """What the Elasticsearch and OpenSearch storages share: everything but the client's dialect."""

    Config = SearchEngineConfig
    # BM25 as the engine reports it, times this, is Lucene's BM25 (API.md, and our own engine)
    bm25_scale = 1.0
    # API.md section 8 and the text query syntax run on the engine (lexical.py); linear fusion here
    query_options = frozenset({"linear", "text_fields", "syntax", "operator"})
    # API.md section 10: several dense fields, sparse and multi-vector ones (fields.py)
    named_vectors = True
    vector_kinds = frozenset({"sparse", "multi"})
    remote_modes = True  # mode= settled in _open_index

    def __init__(self, schema, config: SearchEngineConfig) -> None:
        options = config.as_dict()
        super().__init__(schema, config, secret_strings(options), V.SearchEngineCodec(schema))
        self.kinds = V.kinds(schema)
        # the options without credentials: enough to reach an unsecured node again (e.g. a
        # second client, `_make_client(storage.options)`)
        self.options = config.as_public_dict()
        self.index = config.index
        self.refresh = config.refresh
        self.chunk_size = config.chunk_size
        self.client = self._make_client(options)
        self._open_index(options)
        self.next_seq = self._max_seq() + 1
        self._size = {}  # vector field -> documents holding it, as last counted; emptied by a write
        # whether writes by condition go through _delete_by_query / _update_by_query: None until
        # the first one asks the dialect (`_by_query_usable`), False once the node refused them
        self._by_query = None

    def address(self) -> dict:
        return {"hosts": self.config.hosts, "index": self.index}

    def call(self, what: str, fn, *args, **kwargs):
        """RemoteStorage.call, where an answer missing shards or documents (answers.py) is a
        failure too: resent like a 503, then BackendError, never returned as if whole."""
        return super().call(what, A.whole, fn, *args, **kwargs)

    def failure(self, e):
        if isinstance(e, A.PartialAnswer):
            return A.PARTIAL_STATUS, f"partial answer: {e}"
        return self._client_failure(e)

    # ------------------------------------------------------------ dialect
    def _make_client(self, options: dict):
        raise NotImplementedError

    def _vector_mapping(self, options: dict, field: str) -> dict:
        """The mapping of dense vector field `field` (its dimension and metric)."""
        raise NotImplementedError

    # the mapping type of a sparse field's searched copy, and its dot-product query (fields.py)
    _SPARSE_TYPE = "rank_features"

    def _sparse_query(self, field: str, query: tuple) -> dict:
        return V.rank_feature_query(field, query)

    def _index_settings(self, options: dict) -> dict:
        return {"number_of_shards": options["shards"], "number_of_replicas": options["replicas"]}

    def _knn_body(self, q: np.ndarray, k: int, ef: int, flt: Optional[dict], field: str) -> dict:
        """The search body of a pre-filtered vector query for the k nearest of dense field `field`."""
        raise NotImplementedError

    def _streaming_bulk(self, client, actions, **kwargs):
        """The client library's `helpers.streaming_bulk`."""
        raise NotImplementedError

    def _client_failure(self, e):
        """(status or None, reason) when `e` is an error of the client library, else None."""
        raise NotImplementedError

    def _with_params(self, body: dict) -> dict:
        """The keyword arguments carrying a request body when query parameters travel beside it
        (opensearch-py: `body=`)."""
        return {"body": body}

    def _by_query_usable(self) -> bool:
        """Whether delete_by_query / update_by_query can be trusted on this index."""
        return True

    # ------------------------------------------------------------- plumbing
    def _open_index(self, options: dict) -> None:
        # the one metric of a one-field schema (the format of indexes before named fields), else all
        metric = (self.metric if len(self.schema.vectors) <= 1 and not self.schema.multi
                  else sorted(self.metrics.items()))
        fp = Q.fingerprint(self.schema, metric)
        exists = self.call("check the index", self.client.indices.exists, index=self.index)
        self.settle_mode(exists, f"index {self.index!r}")
        if not exists:
            vector = V.properties(self.schema, lambda name: self._vector_mapping(options, name), self._SPARSE_TYPE)
            body = {"settings": self._index_settings(options),
                    "mappings": {"dynamic": "strict", "_meta": {Q.META_KEY: fp},
                                 "properties": Q.properties(self.schema, vector)}}
            if self.create_or_find("create the index", lambda: self.client.indices.create(
                    index=self.index, body=body), "already_exists") is not None:
                self.spread = A.spread(options["shards"])
                return
        mapping = self.call("read the mapping", self.client.indices.get_mapping, index=self.index)
        meta = (dict(mapping).get(self.index, {}).get("mappings", {}).get("_meta") or {})
        if Q.META_KEY not in meta:
            raise BackendError(f"index {self.index!r} exists and was not created by hybridsearch")
        if meta[Q.META_KEY] != fp:
            raise BackendError(f"index {self.index!r} holds another schema or metric ({meta[Q.META_KEY]})")
        res = self.call("read the index settings", self.client.indices.get_settings, index=self.index,
                        name="index.number_of_shards", flat_settings=True)
        self.spread = A.spread(int(dict(res)[self.index]["settings"]["index.number_of_shards"]))

    def _search(self, body: dict, what: str = "search", **params) -> list:
        res = self.call(what, self.client.search, index=self.index, body=body, **A.spread_of(self.spread, body),
                        **params)
        return list(res["hits"]["hits"])

    def _max_seq(self) -> int:
        hits = self._search({"size": 1, "sort": [{SEQ_FIELD: "desc"}], "_source": False,
                             "docvalue_fields": [SEQ_FIELD]}, "read the insertion sequence")
        return int(hits[0]["fields"][SEQ_FIELD][0]) if hits else 0

    def _mget(self, ids: list, source=True, versions: bool = False) -> dict:
        """id -> _source of the ids that exist (one request per chunk); `versions`: id ->
        (_source, {"if_seq_no", "if_primary_term"} of the version read)."""
        out = {}
        for a in range(0, len(ids), PAGE):
            res = self.call("read documents", self.client.mget, index=self.index,
                            body={"ids": ids[a:a + PAGE]}, _source=source)
            for d in res["docs"]:
                if d.get("found"):
                    src = d.get("_source", {})
                    out[d["_id"]] = (src, {"if_seq_no": d["_seq_no"], "if_primary_term": d["_primary_term"]}
                                     ) if versions else src
        return out

    def _docs(self, hits: list) -> list:
        return [self.codec.document(h["_source"], h["_id"]) for h in hits]

    # --------------------------------------------------------------- writes
    def _bulk(self, actions: list) -> tuple:
        """Runs (op, id, source) actions through the client's bulk helper, `chunk_size` per request.

        -> ({id: (ok, item)} for every action that got an answer, the BackendError that
        stopped the run or None). Documents the engine rejects with 429 are resent by the
        helper with backoff; other per-document failures come back as (False, item).
        """
        def expand(act):
            op, i, src = act
            out = {"_op_type": op, "_index": self.index, "_id": i}
            if op != "delete":
                out["_source"] = src
            return out

        results = {}
        try:
            for ok, item in self._streaming_bulk(
                    self.client, map(expand, actions), chunk_size=self.chunk_size, raise_on_error=False,
                    raise_on_exception=True, max_retries=self.max_retries,
                    initial_backoff=self.retry_backoff, max_backoff=MAX_BACKOFF, refresh=self.refresh):
                (op, info), = item.items()
                # deleting an absent id is not a failure (delete() counts what was there)
                results[info["_id"]] = (ok or (op == "delete" and info.get("status") == 404), info)
        except Exception as e:  # the client's errors are translated, anything else propagates
            info = self.failure(e)
            if info is None:
                raise
            return results, self.error("write documents", *info)
        return results, None

    def _restore(self, items: list) -> bool:
        """Puts back (id, source or None: delete) in one bulk run; whether every one went back."""
        if not items:
            return True
        fixed, broke = self._bulk([("index", i, src) if src is not None else ("delete", i, None)
                                   for i, src in items])
        return broke is None and all(ok for ok, _ in fixed.values())

    def _undo(self, ids: list, results: dict, before: dict, seq0: Optional[int] = None) -> str:
        """Rolls back every id that was, or may have been (no answer), changed by the batch."""
        touched = [i for i in ids if i not in results or results[i][0]]
        return self.rollback(self._restore, touched, before, seq0)

    def upsert(self, batch: Batch) -> None:
        if not batch.docs:
            return
        ids = [d.id for d in batch.docs]
        before = self._mget(ids)  # pre-images: kept sequence numbers, and what to restore on failure
        seq0 = self.next_seq
        sources = [self.codec.fields(d, seq) for d, seq in zip(batch.docs, self.sequence(ids, before))]
        self._size = {}
        results, stopped = self._bulk([("index", i, s) for i, s in zip(ids, sources)])
        failed = [(i, results[i][1]) for i in ids if i in results and not results[i][0]]
        if not failed and stopped is None:
            return
        state = self._undo(ids, results, before, seq0)
        if stopped is not None:
            raise BackendError(f"{stopped}; {state}")
        raise BackendError(self.redact(f"{self.engine} rejected {len(failed)} of {len(ids)} documents "
                                       f"({A.bulk_reasons(failed)}); {state}"))

    def delete(self, ids: list) -> int:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        before = self._mget(ids)  # what to put back if the delete stops half-way
        if not before:
            return 0
        self._size = {}
        ids = [i for i in ids if i in before]
        results, stopped = self._bulk([("delete", i, None) for i in ids])
        bad = [(i, results[i][1]) for i in ids if i in results and not results[i][0]]
        if stopped is None and not bad:
            return sum(1 for _, info in results.values() if info.get("result") == "deleted")
        state = self._undo(ids, results, before)
        if stopped is not None:
            raise BackendError(f"{stopped}; {state}")
        raise BackendError(self.redact(f"{self.engine} failed to delete {len(bad)} of {len(ids)} documents "
                                       f"({bad[:3]}); {state}"))

    def update_fields(self, id: str, values: dict) -> None:
        # the write is built from the document as read, so it is sent on condition that nobody
        # wrote the document since (if_seq_no / if_primary_term): another client's write in
        # between is answered 409 and the update starts again from the new version, not lost
        for _ in range(UPDATE_TRIES):
            found = self._mget([id], versions=True).get(id)
            if found is None:
                raise KeyError(id)
            if not values:
                return
            self._size = {}
            src, version = found
            try:
                self._write_fields(id, src, values, version)
                return
            except BackendError as e:
                if getattr(e, "status", None) != 409:
                    raise
        raise BackendError(self.redact(f"{self.engine} at {self.where()} failed to update document {id!r}: "
                                       f"another client wrote it between each of {UPDATE_TRIES} reads and "
                                       f"the write; nothing was changed, try again"))

    def _write_fields(self, id: str, src: dict, values: dict, version: dict) -> None:
        """Writes `values` over document `id` as read (`src`), if it is still at `version`."""
        if self.codec.whole(values):  # a partial update would merge a sparse value into the old one
            doc = self.codec.document(src, id).model_copy(update=values)
            self.call("update a document", self.client.index, index=self.index, id=id,
                      body=self.codec.fields(doc, int(src[SEQ_FIELD])), refresh=self.refresh, **version)
            return
        self.call("update a document", self.client.update, index=self.index, id=id,
                  body={"doc": self.codec.update(src, values)}, refresh=self.refresh, **version)

    # ---------------------------------------------------------------- reads
    def count(self) -> int:
        return int(self.call("count documents", self.client.count, index=self.index)["count"])

    def contains(self, id: str) -> bool:
        return bool(self._mget([id], source=False))

    def get(self, ids: list) -> list:
        found = self._mget(list(ids))
        return [self.codec.document(found[i], i) if i in found else None for i in ids]

    def _scan(self, query: dict, limit: Optional[int], source) -> list:
        """Matching hits in insertion order (search_after over hs_seq), up to limit (None: all)."""
        # the id breaks ties: two clients writing one index can hand out the same sequence
        # number, and search_after over a tied sort value would skip documents
        return self._paged(query, [{SEQ_FIELD: "asc"}, {Q.ID_FIELD: "asc"}], limit, source)[0]

    def _paged(self, query: dict, sort: list, limit: Optional[int], source, total: bool = False,
               scores: bool = False) -> tuple:
        """(hits up to limit (None: all) in `sort` order, every match counted or None).

        Pages of PAGE hits through search_after, so neither a large limit nor a deep offset meets
        the engine's from + size ceiling (index.max_result_window); `sort` must end in a unique
        key. `total` counts every match in the first request (track_total_hits); `scores` keeps
        each hit's _score while sorting by fields (track_scores)."""
        hits, after, count = [], None, None
        while True:
            size = PAGE if limit is None else min(PAGE, limit - len(hits))
            body = {"size": size, "query": query, "sort": sort, "_source": source}
            if total and after is None:
                body["track_total_hits"] = True
            if scores:
                body["track_scores"] = True
            if after is not None:
                body["search_after"] = after
            res = self.call("list documents" if not total else "run a sorted query", self.client.search,
                            index=self.index, body=body, **self.spread)
            page = list(res["hits"]["hits"])
            if total and after is None:
                count = int(res["hits"]["total"]["value"])
            hits += page
            if len(page) < size or size == 0 or (limit is not None and len(hits) >= limit):
                return hits, count
            after = page[-1]["sort"]

    def iter_ids(self) -> Iterator[str]:
        return iter([h["_id"] for h in self._scan({"match_all": {}}, None, False)])

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        if limit == 0:
            return [], []
        docs = self._docs(self._scan({"bool": {"filter": [Q.to_query(node, self.schema)]}}, limit, True))
        return [d.id for d in docs], docs

    # ------------------------------------------- API.md section 7, on the engine
    def _match_query(self, node: Optional[Node], text) -> dict:
        """The documents a count, facet or sorted find covers: those matching `node` and, with
        `text`, those find(text=) matches (the same lexical query)."""
        flt = self._filter_clause(node)
        if text is None:
            return {"bool": {"filter": [flt]}} if flt else {"match_all": {}}
        self.need_texts()
        return self._lexical_query(text, flt)

    def count_matches(self, node: Optional[Node], text) -> int:
        """The engine's _count of the matching documents (no hit is fetched)."""
        return int(self.call("count matches", self.client.count, index=self.index,
                             body={"query": self._match_query(node, text)})["count"])

    def _aggregate(self, query: dict, agg: dict, what: str) -> dict:
        """The answer of one aggregation over the documents `query` matches (no hit fetched)."""
        res = self.call(what, self.client.search, index=self.index,
                        body={"size": 0, "track_total_hits": False, "query": query, "aggs": {"f": agg}})
        return res["aggregations"]["f"]

    def facets(self, field: str, node: Optional[Node], text, limit: int, ranges: Optional[list]) -> list:
        """A terms aggregation (count descending, value ascending; `limit` buckets) or a range
        aggregation, in one request. A terms aggregation over several shards merges each shard's
        top values and may miss counts; when the engine says so (doc_count_error_upper_bound > 0)
        the counts are read exactly from a composite aggregation instead."""
        query = self._match_query(node, text)
        if ranges is not None:
            buckets = self._aggregate(query, Q.range_agg(field, ranges), "count facet ranges")["buckets"]
            counts = {b["key"]: int(b["doc_count"]) for b in buckets}
            return [((lo, hi), counts.get(str(n), 0)) for n, (lo, hi) in enumerate(ranges)]
        if limit == 0:  # nothing to return; the engine refuses a terms aggregation of size 0
            return []
        kind = self.schema.fields[field].kind
        if limit <= FACET_TERMS:
            agg = self._aggregate(query, Q.terms_agg(field, limit), "count facet values")
            if not agg.get("doc_count_error_upper_bound"):
                return [(Q.bucket_value(kind, b["key"]), int(b["doc_count"])) for b in agg["buckets"]]
        counts = self._every_count(query, field)
        pairs = sorted(((Q.bucket_value(kind, k), n) for k, n in counts), key=lambda p: (-p[1], p[0]))
        return pairs[:limit]

    def _every_count(self, query: dict, field: str) -> list:
        """(value, count) of every value of `field` over the matches: composite aggregation pages."""
        out, after = [], None
        while True:
            agg = self._aggregate(query, Q.composite_agg(field, FACET_PAGE, after), "count facet values")
            out += [(b["key"]["v"], int(b["doc_count"])) for b in agg["buckets"]]
            after = agg.get("after_key")
            if len(agg["buckets"]) < FACET_PAGE or after is None:
                return out

    def search_sorted(self, node: Optional[Node], text, keys: list, limit: Optional[int]) -> tuple:
        """The engine sorts: the keys (missing last), then BM25 (text), then insertion order; pages
        through search_after, and counts every match in the first request."""
        query = self._match_query(node, text)
        hits, total = self._paged(query, Q.sort_clauses(keys, text is not None), limit, True, total=True,
                                  scores=text is not None)
        docs = self._docs(hits)
        if text is None:
            scores = np.zeros(len(hits), dtype=np.float32)
        else:
            scores = (np.array([h["_score"] for h in hits], dtype=np.float64) * self.bm25_scale).astype(np.float32)
        return [d.id for d in docs], scores, docs, total

    def delete_where(self, node: Node) -> int:
        """delete_by_query (see `_run_by_query`) -> how many were deleted. On a node without it,
        the matching ids are found and deleted in bulk requests, put back if one fails."""
        self._size = {}
        body = {"query": self._match_query(node, None)}
        runs = self._if_by_query("delete by query", self.client.delete_by_query, body, "deleted")
        if runs is None:  # delete() keeps the pre-images and puts them back if a bulk request fails
            return self.delete([h["_id"] for h in self._scan(body["query"], None, False)])
        return sum(int(r.get("deleted", 0)) for r in runs)

    def update_where(self, node: Node, values: dict) -> int:
        """update_by_query with a painless script setting the values (query.update_script) ->
        how many matched. Unindexed fields live together in one JSON string per document, which
        a script cannot edit: such an update (and any, on a node without update_by_query) is a
        read-modify-write of the matching documents through bulk requests instead, rolled back
        like extend when the engine refuses one."""
        if not values:
            return self.count_matches(node, None)
        self._size = {}
        if set(values) & set(self.codec.extra) or self.codec.whole(values):
            return self._rewrite_where(node, values)
        body = {"query": self._match_query(node, None),
                "script": Q.update_script(values, self.schema, self.codec.encode_vector)}
        runs = self._if_by_query("update by query", self.client.update_by_query, body, "updated")
        if runs is None:
            return self._rewrite_where(node, values)
        # the documents the first run's snapshot matched: it updated them, or another writer
        # changed them meanwhile and a later run (over every match again) updated them
        return int(runs[0].get("updated", 0)) + int(runs[0].get("version_conflicts", 0))

    def _if_by_query(self, what: str, fn, body: dict, done: str) -> Optional[list]:
        """`_run_by_query`, or None when it is not to be used here (`_by_query_usable`) or the
        node has no such endpoint: minimal distributions (Elasticsearch's integ-test-zip) leave
        out the reindex module that provides it. The answer is remembered, so such a node costs
        one refused request per storage."""
        if self._by_query is None:
            self._by_query = self._by_query_usable()
        if not self._by_query:
            return None
        try:
            return self._run_by_query(what, fn, body, done)
        except _NoByQuery:
            self._by_query = False
            log.info("%s at %s has no _delete_by_query / _update_by_query (reindex module): writes by "
                     "condition go through bulk requests", self.engine, self.where())
            return None

    def _run_by_query(self, what: str, fn, body: dict, done: str) -> list:
        """Runs a delete_by_query / update_by_query until no document conflicted -> the answers
        (`done`: the answer's count of documents changed, "deleted" or "updated").

        - refresh=true: the engines take no refresh=wait_for here, and a write must be visible
          when it returns, so the shards are refreshed whatever `refresh` says;
        - conflicts=proceed: a document another writer changed after the engine took its
          snapshot is skipped (a version conflict) instead of aborting the run half-way
          (conflicts=abort stops at the first one with an arbitrary part done). The run is then
          repeated, at most max_retries times: the next snapshot holds the new versions, which
          are tested against the filter again (an update run again writes the same values over
          the documents it already changed);
        - an error answer, `failures` or `timed_out` in the answer (a shard or a bulk write
          failed), or conflicts left after the last run -> BackendError saying what may already
          be changed: the engines cannot undo it."""
        def run():
            try:
                return fn(index=self.index, **self._with_params(body), conflicts="proceed", refresh=True)
            except Exception as e:  # a run stopped by failures answers 4xx / 5xx with its counts
                answer = A.error_answer(e)
                if answer is not None and "failures" in answer:
                    return answer
                raise

        runs = []
        for _ in range(self.max_retries + 1):
            try:
                res = dict(self.call(what, run))
            except BackendError as e:
                status = getattr(e, "status", None)
                if not runs and status in (400, 404, 405) and "no handler found" in str(e):
                    raise _NoByQuery() from None
                raise BackendError(f"{e}; {self._partial(runs, done, True, status is not None)}") from None
            runs.append(res)
            failures = list(res.get("failures") or [])
            if failures:
                raise self.error(what, failures[0].get("status"),
                                 f"{A.failure_reason(failures)}; {self._partial(runs, done)}")
            if res.get("timed_out"):
                raise self.refused(what, f"the engine timed out; {self._partial(runs, done)}")
            if not res.get("version_conflicts"):
                return runs
        raise self.refused(what, f"{runs[-1]['version_conflicts']} documents kept changing under another writer "
                                 f"(version conflicts in each of {len(runs)} runs); {self._partial(runs, done)}")

    def _partial(self, runs: list, done: str, failed_request: bool = False, answered: bool = True) -> str:
        """What a by-query call that stopped had already done, which stays done: the engines
        have no multi-document transaction to roll it back. `failed_request`: the last request
        got an error (or no) answer, which carries no counts."""
        n = sum(int(r.get(done, 0)) for r in runs)
        if failed_request and not runs:
            told = f"the failed request may have {done} part of the matching documents"
        elif failed_request:
            told = f"{n} documents were {done} by earlier runs and the failed request may have {done} more"
        else:
            told = f"{n} documents were {done} before it stopped"
        if not answered:
            told += f" ({self.engine} may still be running it: it goes on when the client stops waiting)"
        return f"{told}; {self.engine} has no multi-document transaction to undo that"

    def _rewrite_where(self, node: Node, values: dict) -> int:
        """update_many touching unindexed fields: every matching document rewritten whole in bulk
        requests (one per chunk_size), the old versions put back if any is refused."""
        hits = self._scan(self._match_query(node, None), None, True)
        before = {h["_id"]: h["_source"] for h in hits}
        ids = list(before)
        sources = [self.codec.fields(self.codec.document(before[i], i).model_copy(update=values),
                                     int(before[i][SEQ_FIELD])) for i in ids]
        results, stopped = self._bulk([("index", i, src) for i, src in zip(ids, sources)])
        failed = [(i, results[i][1]) for i in ids if i in results and not results[i][0]]
        if not failed and stopped is None:
            return len(ids)
        state = self._undo(ids, results, before)
        if stopped is not None:
            raise BackendError(f"{stopped}; {state}")
        raise BackendError(self.redact(f"{self.engine} rejected {len(failed)} of {len(ids)} updated documents "
                                       f"({A.bulk_reasons(failed)}); {state}"))

    # --------------------------------------------------------------- vectors
    def _filter_clause(self, node: Optional[Node]) -> Optional[dict]:
        if node is None or isinstance(node, MatchAll):
            return None
        return Q.to_query(node, self.schema)

    @staticmethod
    def _records(hits: list) -> list:
        return [{**h["_source"], Q.ID_FIELD: h["_id"]} for h in hits]

    def search_vectors(self, queries, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int], field: Optional[str] = None) -> list:
        field = self._field(field)
        flt = self._filter_clause(node)
        if self.kinds[field] == "multi":
            return self._multi_answers(queries, limit, flt, field)
        if self.kinds[field] != "dense":
            return [self._answer(self._field_top(q, limit, flt, field), field, q, limit) for q in queries]
        if self._scans_exactly(flt, limit, exact, ef, field):
            records = self._scan_field(flt, field)
            return [self._answer(records, field, q, limit) for q in queries]
        k = min(limit, MAX_CANDIDATES)
        bodies = [self._knn_body(q, k, min(max(ef or self.ef, k), MAX_CANDIDATES), flt, field) for q in queries]
        # several queries travel in one _msearch request
        answers = [self._search(bodies[0], "run a vector query")] if len(bodies) == 1 else self._msearch(bodies)
        out, short, matches = [], [], None
        for n, (q, hits) in enumerate(zip(queries, answers)):
            if len(hits) < limit:
                matches = self._count(flt, field) if matches is None else matches
                if len(hits) < matches:  # the engine came back short: answered exactly below
                    short.append(n)
                    out.append(None)
                    continue
            out.append(self._answer(self._records(hits), field, q, limit))
        if short:
            records = self._scan_field(flt, field)
            for n in short:
                out[n] = self._answer(records, field, queries[n], limit)
        return out

    def _msearch(self, bodies: list, what: str = "run vector queries") -> list:
        """The hits of each search body, sent MSEARCH at a time in one request."""
        out = []
        for a in range(0, len(bodies), MSEARCH):
            lines = []
            for body in bodies[a:a + MSEARCH]:
                lines += [{"index": self.index, **A.spread_of(self.spread, body)}, body]
            res = self.call(what, self.client.msearch, body=lines)
            for r in res["responses"]:
                if "error" in r:  # one failed search fails the call, with its own status and reason
                    err = r["error"]
                    raise self.error(what, r.get("status"), err.get("reason", err) if isinstance(err, dict) else err)
                out.append(list(r["hits"]["hits"]))
        return out

    # ------------------------------------------------------------------ text
    def _lexical_clause(self, text) -> dict:
        """The scoring part of a text find (lexical.text_clause): `multi_match` `best_fields` for
        plain words, the per-field clauses of the query syntax otherwise; `text` is a string or a
        TextQuery (field weights, operator)."""
        return L.text_clause(text, self.texts, 1.0 / self.bm25_scale)

    def _lexical_query(self, text, flt: Optional[dict]) -> dict:
        """The query of a text find: the documents the text query matches (a plain one: holding
        a query term in a searched field), scored by the best field's BM25, and matching `flt`.
        Counts, facets and sorted finds with text use this same query, so they agree with
        find(text=)."""
        return {"bool": {"must": [self._lexical_clause(text)], "filter": [flt] if flt else []}}

    def _lexical_body(self, text, size: int, flt: Optional[dict]) -> dict:
        # equal scores in insertion order, as the embedded storages rank them (on several shards
        # the engine would order them by shard): which of them make a top-n cut is the same
        return {"size": size, "query": self._lexical_query(text, flt), "sort": Q.sort_clauses([], True)}

    def _bm25(self, hits: list) -> np.ndarray:
        """The hits' engine scores as Lucene's BM25 (float64)."""
        return np.array([h["_score"] for h in hits], dtype=np.float64) * self.bm25_scale

    # ------------------------------------- retrieval primitives (query/executor.py fuses)
    def _lexical_hits(self, text, k: int, flt: Optional[dict]) -> list:
        """The lexical top-k hits (ties in insertion order); past one page, search_after pages."""
        if k <= PAGE:
            return self._search(self._lexical_body(text, k, flt))
        return self._paged(self._lexical_query(text, flt), Q.sort_clauses([], True), k, True, scores=True)[0]

    def text_top(self, text, k: int, node: Optional[Node]) -> Candidates:
        self.need_texts()
        hits = self._lexical_hits(text, k, self._filter_clause(node))
        return self.lexical_list(text, node, self._records(hits), self._bm25(hits), k)

    def text_matches(self, text, node: Optional[Node]) -> Candidates:
        self.need_texts()
        query = self._lexical_query(text, self._filter_clause(node))
        hits = self._paged(query, Q.sort_clauses([], True), None, True, scores=True)[0]
        return self.lexical_list(text, node, self._records(hits), self._bm25(hits), None)

    def bm25_of(self, text, ids: list) -> dict:
        """The lexical query restricted to the ids (an `ids` filter leaves BM25's statistics, and
        so the scores, as they are)."""
        out = {}
        for a in range(0, len(ids), PAGE):
            chunk = ids[a:a + PAGE]
            hits = self._search({"size": len(chunk), "_source": False,
                                 "query": self._lexical_query(text, {"ids": {"values": chunk}})},
                                "score documents by text")
            out.update(zip([h["_id"] for h in hits], self._bm25(hits).tolist()))
        return out

    def records_of(self, ids: list) -> dict:
        return {i: {**src, Q.ID_FIELD: i} for i, src in self._mget(ids).items()}

    def vector_top(self, query, k: int, node: Optional[Node], exact: bool, ef: Optional[int],
                   field: Optional[str] = None) -> Candidates:
        """A dense field: the engine's pre-filtered knn list (ef candidates), ranked by the exact
        score; the exact scan where search_vectors takes it (a small collection, a short answer,
        exact). A sparse or multi-vector field (`query` a list holding one checked query): the
        candidates of `_field_top`, ranked by the exact score."""
        field = self._field(field)
        flt = self._filter_clause(node)
        if self.kinds[field] != "dense":
            return self._field_list(self._field_top(query[0], k, flt, field), field, query[0], k)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        hits = (None if self._scans_exactly(flt, k, exact, ef, field)
                else self._knn_search(q, *self._knn_args(k, ef), flt, field))
        return self._vector_candidates(q, k, flt, hits, field)

    def hybrid_lists(self, text, k: int, every_match: bool, query, node: Optional[Node], exact: bool,
                     ef: Optional[int], field: Optional[str] = None) -> tuple:
        """The lexical top-k and a dense field's knn list in one _msearch (the other cases one by one)."""
        self.need_texts()
        field = self._field(field)
        flt = self._filter_clause(node)
        if every_match or k > PAGE or self.kinds[field] != "dense":
            return super().hybrid_lists(text, k, every_match, query, node, exact, ef, field=field)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        # exact: the scan's first page beside the lexical query; else the knn query (no count of
        # the collection first, as vector_top makes: one round trip, the knn list asked for
        # max(ef, k) candidates, and the exact scan where it comes back short)
        scan = exact
        second = ({"size": PAGE, "query": self._with_vector(flt, field),
                   "sort": [{SEQ_FIELD: "asc"}, {Q.ID_FIELD: "asc"}], "_source": True}
                  if scan else self._knn_body(q, *self._knn_args(k, ef), flt, field))
        lex, hits = self._msearch([self._lexical_body(text, k, flt), second], "run a hybrid query")
        lexical = self.lexical_list(text, node, self._records(lex), self._bm25(lex), k)
        if not scan:
            return lexical, self._vector_candidates(q, k, flt, hits, field)
        records = self._scan_field(flt, field) if len(hits) >= PAGE else self._records(hits)  # more than a page: whole
        return lexical, self._field_list(records, field, q, k)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # closing a client whose node is gone must not raise
            pass


class ElasticsearchStorage(SearchEngineStorage):
    """Elasticsearch 8.x through the official `elasticsearch` client."""

    name = "elasticsearch"
    engine = "Elasticsearch"
    # Elasticsearch scores with LegacyBM25Similarity, which keeps the (k1 + 1) factor that
    # Lucene 8 dropped from BM25's numerator: every lexical score is 2.2x Lucene's
    bm25_scale = 1.0 / 2.2
    _SIMILARITY = {"cosine": "cosine", "ip": "max_inner_product", "l2": "l2_norm"}
    # sparse_vector (x-pack core) rather than rank_features, which lives in the mapper-extras
    # module that minimal distributions leave out; both keep 9 significant bits
    _SPARSE_TYPE = "sparse_vector"

    def _sparse_query(self, field: str, query: tuple) -> dict:
        return V.sparse_vector_query(field, query)

    def _make_client(self, options: dict):
        from elasticsearch import Elasticsearch
        # a connection error goes on to the next of several hosts; statuses are resent by `call`
        kw = {"request_timeout": float(options["timeout"]), "verify_certs": bool(options["verify_certs"]),
              "max_retries": A.failover_retries(options["hosts"]), "retry_on_status": (),
              "retry_on_timeout": False}
        for key in ("basic_auth", "api_key", "ca_certs", "client_cert", "client_key"):
            if options.get(key) is not None:
                kw[key] = tuple(options[key]) if key == "basic_auth" else options[key]
        try:
            return Elasticsearch(options["hosts"], **kw)
        except (ValueError, TypeError) as e:
            raise ConfigError(self.redact(f"cannot configure the Elasticsearch client: {e}")) from None

    def _vector_mapping(self, options: dict, field: str) -> dict:
        return {"type": "dense_vector", "dims": self.schema.vectors[field].dim, "index": True,
                "similarity": self._SIMILARITY[self.metrics[field]],
                "index_options": {"type": "hnsw", "m": options["m"], "ef_construction": options["ef_construct"]}}

    def _knn(self, q, k, ef, flt, field) -> dict:
        knn = {"field": field, "query_vector": [float(x) for x in q], "k": k, "num_candidates": ef}
        if flt:
            knn["filter"] = flt
        return knn

    def _knn_body(self, q, k, ef, flt, field) -> dict:
        return {"size": k, "knn": self._knn(q, k, ef, flt, field)}

    def _with_params(self, body: dict) -> dict:
        # the 8.x client takes the body's fields as arguments; `body=` beside query parameters
        # is deprecated
        return dict(body)

    def _streaming_bulk(self, client, actions, **kwargs):
        from elasticsearch.helpers import streaming_bulk
        return streaming_bulk(client, actions, retry_on_status=RETRY_STATUS, **kwargs)

    def _client_failure(self, e):
        """(status or None, reason) of an error of the elasticsearch client, else None."""
        import elastic_transport
        from elasticsearch import ApiError
        if isinstance(e, ApiError):
            body = e.body if isinstance(e.body, dict) else {}
            return e.meta.status, f"{e.message}: {A.error_reason(body)}"
        if isinstance(e, elastic_transport.TransportError):
            return None, f"{type(e).__name__}: {e.message}"
        return None
