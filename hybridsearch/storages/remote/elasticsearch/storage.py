"""storage="elasticsearch" (and, through opensearch.py, "opensearch"): the DocumentArray API over a
real search engine.

One index per collection. The mapping comes from the schema (query.properties); the vector
field is `dense_vector` with HNSW `index_options` on Elasticsearch and a Lucene-engine
`knn_vector` on OpenSearch. What the two engines share lives in `SearchEngineStorage`; the
subclasses differ in the client, the vector mapping, the vector query and the error types.
What every remote storage shares (retries, redaction, rollback, document <-> fields, exact
rescoring) lives in ../base.py.

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
  `ElasticsearchStorage.bm25_scale`); hybrid "sum" takes its candidates from the
  engine's bool + knn sum (the e-commerce benchmark's query) and ranks them by
  BM25 (the lexical clause's named-query score) + vector score; "rrf" is fused here;
- a filtered vector search is pre-filtered (`knn.filter`); when the engine
  returns fewer than min(limit, matches) hits, the query is answered exactly
  by scoring every matching document's vector here;
- errors: connection failures, timeouts and 4xx/5xx become `hs.BackendError`
  with status and reason; 429 and 503 are retried with exponential backoff;
  credentials are redacted from every message and never part of a repr.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.errors import BackendError, ConfigError, UnsupportedError
from hybridsearch.query.filters import MatchAll, Node
from hybridsearch.query.fusion import fuse_sum
from hybridsearch.storages.base import exact_scores, rank_exactly
from hybridsearch.storages.config import integer, option, path_or_none
from hybridsearch.storages.remote.base import (RETRY_STATUS, SEQ_FIELD, FieldCodec, RemoteConfig, RemoteStorage,
                                               rrf, userinfo_secrets)
from hybridsearch.storages.remote.elasticsearch import query as Q

PAGE = 5000             # documents per page when listing (engines cap one page at 10,000)
MAX_CANDIDATES = 10000  # num_candidates / k ceiling of both engines
MSEARCH = 100           # searches per _msearch request
LEXICAL = "hs_text"     # the name of the lexical clause in a hybrid query (its score comes back by name)


def _secret_strings(options: dict) -> list:
    """The password of basic_auth, the API key (both parts of an (id, key) pair) and the
    credentials written into the host URLs."""
    out = []
    auth = options.get("basic_auth")
    if isinstance(auth, (tuple, list)) and len(auth) == 2:
        out.append(str(auth[1]))
    key = options.get("api_key")
    if isinstance(key, (tuple, list)):
        out += [str(k) for k in key]
    elif key:
        out.append(str(key))
    hosts = options.get("hosts")
    for h in (hosts if isinstance(hosts, (list, tuple)) else [hosts]):
        out += userinfo_secrets(h)
    return out


def _hosts(v):
    if isinstance(v, str) and v:
        return v
    if isinstance(v, (list, tuple)) and v and all(isinstance(h, (str, dict)) for h in v):
        return list(v)
    raise ValueError("a URL or a list of URLs")


def _pair_or_none(v):
    if v is None:
        return None
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return tuple(v)
    raise ValueError("a (user, password) pair or None")


def _refresh(v):
    if v == "wait_for" or v is True:
        return v
    raise ValueError("'wait_for' or True (writes must be visible on return)")


def _index_name(v):
    try:
        return Q.check_index_name(v)
    except ConfigError as e:
        raise ValueError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class SearchEngineConfig(RemoteConfig):
    """Options of storage="elasticsearch" and "opensearch"."""

    hosts: Any = option("http://127.0.0.1:9200", _hosts,
                        "the node URL(s); a user:password@ in one is sent as basic auth, never shown",
                        secret=True)  # only the URLs without user:password appear (stats, errors)
    index: str = option("hybridsearch", _index_name, "the index of this collection (created from the schema "
                        "on first open)")
    m: int = option(16, integer(2), "links per node of the index's HNSW graph (the mapping's m)")
    ef_construct: int = option(100, integer(1), "beam width while indexing (the mapping's ef_construction)")
    ef: int = option(100, integer(1), "num_candidates (Elasticsearch) / ef_search (OpenSearch) of a vector "
                     "query; find(ef=...) overrides it")
    refresh: Any = option("wait_for", _refresh, "how a write is visible when it returns: 'wait_for' the next "
                          "refresh, or True to force one")
    chunk_size: int = option(500, integer(1), "documents per bulk request")
    basic_auth: Any = option(None, _pair_or_none, "(user, password) for the node", secret=True)
    api_key: Any = option(None, None, "an API key (string or (id, key))", secret=True)
    client_cert: Optional[str] = option(None, path_or_none, "client certificate (mutual TLS)")
    client_key: Optional[str] = option(None, path_or_none, "client key (mutual TLS)")
    shards: int = option(1, integer(1), "primary shards of a new index")
    replicas: int = option(0, integer(0), "replicas of a new index")


class SearchEngineStorage(RemoteStorage):
    """What the Elasticsearch and OpenSearch storages share: everything but the client's dialect."""

    Config = SearchEngineConfig
    # BM25 as the engine reports it, times this, is Lucene's BM25 (API.md, and our own engine)
    bm25_scale = 1.0

    def __init__(self, schema, config: SearchEngineConfig) -> None:
        options = config.as_dict()
        super().__init__(schema, config, _secret_strings(options), FieldCodec(schema))
        # the options without credentials: enough to reach an unsecured node again (e.g. a
        # second client, `_make_client(storage.options)`)
        self.options = config.as_public_dict()
        self.index = config.index
        self.refresh = config.refresh
        self.chunk_size = config.chunk_size
        self.client = self._make_client(options)
        self._open_index(options)
        self.next_seq = self._max_seq() + 1
        self._size = None  # documents with a vector, as last counted; None after a write

    def address(self) -> dict:
        return {"hosts": self.config.hosts, "index": self.index}

    # ------------------------------------------------------------ dialect
    def _make_client(self, options: dict):
        raise NotImplementedError

    def _vector_mapping(self, options: dict) -> dict:
        raise NotImplementedError

    def _index_settings(self, options: dict) -> dict:
        return {"number_of_shards": options["shards"], "number_of_replicas": options["replicas"]}

    def _knn_body(self, q: np.ndarray, k: int, ef: int, flt: Optional[dict]) -> dict:
        """The search body of a pre-filtered vector query for the k nearest."""
        raise NotImplementedError

    def _hybrid_body(self, text: str, q: np.ndarray, size: int, ef: int, flt: Optional[dict]) -> dict:
        raise NotImplementedError

    def _streaming_bulk(self, client, actions, **kwargs):
        """The client library's `helpers.streaming_bulk`."""
        raise NotImplementedError

    # ------------------------------------------------------------- plumbing
    def _open_index(self, options: dict) -> None:
        fp = Q.fingerprint(self.schema, self.metric)
        exists = self.call("check the index", self.client.indices.exists, index=self.index)
        if exists:
            mapping = self.call("read the mapping", self.client.indices.get_mapping, index=self.index)
            meta = (dict(mapping).get(self.index, {}).get("mappings", {}).get("_meta") or {})
            if Q.META_KEY not in meta:
                raise BackendError(f"index {self.index!r} exists and was not created by hybridsearch")
            if meta[Q.META_KEY] != fp:
                raise BackendError(f"index {self.index!r} holds another schema or metric ({meta[Q.META_KEY]})")
            return
        vector = self._vector_mapping(options) if self.vec else None
        body = {"settings": self._index_settings(options),
                "mappings": {"dynamic": "strict", "_meta": {Q.META_KEY: fp},
                             "properties": Q.properties(self.schema, vector)}}
        self.call("create the index", self.client.indices.create, index=self.index, body=body)

    def _search(self, body: dict, what: str = "search", **params) -> list:
        res = self.call(what, self.client.search, index=self.index, body=body, **params)
        return list(res["hits"]["hits"])

    def _max_seq(self) -> int:
        hits = self._search({"size": 1, "sort": [{SEQ_FIELD: "desc"}], "_source": False,
                             "docvalue_fields": [SEQ_FIELD]}, "read the insertion sequence")
        return int(hits[0]["fields"][SEQ_FIELD][0]) if hits else 0

    def _mget(self, ids: list, source=True) -> dict:
        """id -> _source of the ids that exist (one request per chunk)."""
        out = {}
        for a in range(0, len(ids), PAGE):
            res = self.call("read documents", self.client.mget, index=self.index,
                            body={"ids": ids[a:a + PAGE]}, _source=source)
            for d in res["docs"]:
                if d.get("found"):
                    out[d["_id"]] = d.get("_source", {})
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
                    initial_backoff=self.retry_backoff, max_backoff=30, refresh=self.refresh):
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
        self._size = None
        results, stopped = self._bulk([("index", i, s) for i, s in zip(ids, sources)])
        failed = [(i, results[i][1]) for i in ids if i in results and not results[i][0]]
        if not failed and stopped is None:
            return
        state = self._undo(ids, results, before, seq0)
        if stopped is not None:
            raise BackendError(f"{stopped}; {state}")
        reasons = "; ".join(f"{i!r}: {info.get('error', {}).get('type', '')} "
                            f"{info.get('error', {}).get('reason', info.get('status'))}" for i, info in failed[:5])
        raise BackendError(self.redact(f"{self.engine} rejected {len(failed)} of {len(ids)} documents "
                                       f"({reasons}); {state}"))

    def delete(self, ids: list) -> int:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        before = self._mget(ids)  # what to put back if the delete stops half-way
        if not before:
            return 0
        self._size = None
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
        src = self._mget([id]).get(id)
        if src is None:
            raise KeyError(id)
        if not values:
            return
        self._size = None
        self.call("update a document", self.client.update, index=self.index, id=id,
                  body={"doc": self.codec.update(src, values)}, refresh=self.refresh)

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
        hits, after = [], None
        while limit is None or len(hits) < limit:
            size = PAGE if limit is None else min(PAGE, limit - len(hits))
            # the id breaks ties: two clients writing one index can hand out the same sequence
            # number, and search_after over a tied sort value would skip documents
            body = {"size": size, "query": query, "sort": [{SEQ_FIELD: "asc"}, {Q.ID_FIELD: "asc"}],
                    "_source": source}
            if after is not None:
                body["search_after"] = after
            page = self._search(body, "list documents")
            hits += page
            if len(page) < size:
                break
            after = page[-1]["sort"]
        return hits

    def iter_ids(self) -> Iterator[str]:
        return iter([h["_id"] for h in self._scan({"match_all": {}}, None, False)])

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        if limit == 0:
            return [], []
        docs = self._docs(self._scan({"bool": {"filter": [Q.to_query(node, self.schema)]}}, limit, True))
        return [d.id for d in docs], docs

    # --------------------------------------------------------------- vectors
    def _filter_clause(self, node: Optional[Node]) -> Optional[dict]:
        if node is None or isinstance(node, MatchAll):
            return None
        return Q.to_query(node, self.schema)

    def _with_vector(self, flt: Optional[dict]) -> dict:
        """The query of the documents that hold a vector and match `flt`."""
        return {"bool": {"filter": [{"exists": {"field": self.vec.name}}] + ([flt] if flt else [])}}

    @staticmethod
    def _records(hits: list) -> list:
        return [{**h["_source"], Q.ID_FIELD: h["_id"]} for h in hits]

    def _exact(self, queries: np.ndarray, limit: int, flt: Optional[dict]) -> list:
        """Brute force here over every matching document that has a vector (one scan for all
        the queries) -> (ids, scores, docs) of each query."""
        return self.rescored_each(self._records(self._scan(self._with_vector(flt), None, True)), queries, limit)

    def _exact_hits(self, q: np.ndarray, n: int, flt: Optional[dict]) -> list:
        """The n matching hits nearest to q by exact score (every matching vector scored here)."""
        every = self._scan(self._with_vector(flt), None, True)
        if not every:
            return []
        order, _ = rank_exactly(self.vectors([h["_source"] for h in every]), q, self.metric, n)
        return [every[i] for i in order]

    def _count(self, flt: Optional[dict]) -> int:
        return int(self.call("count matches", self.client.count, index=self.index,
                             body={"query": self._with_vector(flt)})["count"])

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        self.need_vector()
        flt = self._filter_clause(node)
        if flt is None and not exact:
            # like a filtered Lucene query whose matches fit in num_candidates: when the whole
            # collection is no larger than the candidate list, scan it exactly (a graph walk over
            # so few points, or over many duplicates, can miss part of the true top-k)
            if self._size is None:
                self._size = self._count(None)
            exact = self._size <= min(max(ef or self.ef, limit), MAX_CANDIDATES)
        if exact:
            return self._exact(queries, limit, flt)
        k = min(limit, MAX_CANDIDATES)
        bodies = [self._knn_body(q, k, min(max(ef or self.ef, k), MAX_CANDIDATES), flt) for q in queries]
        # several queries travel in one _msearch request
        answers = [self._search(bodies[0], "run a vector query")] if len(bodies) == 1 else self._msearch(bodies)
        out, short, matches = [], [], None
        for n, (q, hits) in enumerate(zip(queries, answers)):
            if len(hits) < limit:
                matches = self._count(flt) if matches is None else matches
                if len(hits) < matches:  # the engine came back short: answered exactly below
                    short.append(n)
                    out.append(None)
                    continue
            out.append(self.rescored(self._records(hits), q, limit))
        if short:
            for n, result in zip(short, self._exact(queries[short], limit, flt)):
                out[n] = result
        return out

    def _msearch(self, bodies: list, what: str = "run vector queries") -> list:
        """The hits of each search body, sent MSEARCH at a time in one request."""
        out = []
        for a in range(0, len(bodies), MSEARCH):
            lines = []
            for body in bodies[a:a + MSEARCH]:
                lines += [{"index": self.index}, body]
            res = self.call(what, self.client.msearch, body=lines)
            for r in res["responses"]:
                if "error" in r:  # one failed search fails the call, with its own status and reason
                    err = r["error"]
                    raise self.error(what, r.get("status"), err.get("reason", err) if isinstance(err, dict) else err)
                out.append(list(r["hits"]["hits"]))
        return out

    # ------------------------------------------------------------------ text
    def _lexical_body(self, text: str, size: int, flt: Optional[dict]) -> dict:
        query = {"multi_match": {"query": text, "fields": self.texts, "type": "best_fields"}}
        return {"size": size, "query": {"bool": {"must": [query], "filter": [flt] if flt else []}}}

    def search_text(self, text: str, q, k: int, node: Optional[Node], *, fusion: str = "sum",
                    candidates: int = 100, rrf_k: int = 60, exact: bool = False, ef=None) -> tuple:
        self.need_texts()
        flt = self._filter_clause(node)
        if q is None:
            hits = self._search(self._lexical_body(text, k, flt))
            docs = self._docs(hits)
            scores = np.array([h["_score"] for h in hits], dtype=np.float64) * self.bm25_scale
            return [d.id for d in docs], scores.astype(np.float32), docs
        q = q[0]
        pool = min(max(candidates, k), MAX_CANDIDATES)
        ef = min(max(ef or self.ef, pool), MAX_CANDIDATES)
        if fusion == "rrf":
            lex = self._search(self._lexical_body(text, pool, flt))
            vec = self._exact_hits(q, pool, flt) if exact else self._knn_search(q, pool, ef, flt)
            chosen, scores = rrf([h["_id"] for h in lex], [h["_id"] for h in vec], k, rrf_k)
            by_id = {h["_id"]: h["_source"] for h in lex}
            missing = [i for i in chosen if i not in by_id]
            by_id.update(self._mget(missing) if missing else {})
            return chosen, scores, [self.codec.document(by_id[i], i) for i in chosen]
        hits, bm25 = (self._hybrid_exact if exact else self._hybrid_engine)(text, q, pool, ef, flt)
        if not hits:
            return [], np.empty(0, dtype=np.float32), []
        order, scores = fuse_sum(np.arange(len(hits)), bm25,
                                 exact_scores(self.vectors([h["_source"] for h in hits]), q, self.metric), k)
        docs = self._docs([hits[i] for i in order])
        return [d.id for d in docs], scores, docs

    def _knn_search(self, q: np.ndarray, k: int, ef: int, flt: Optional[dict]) -> list:
        """Engine hits (dicts with _id, _score, _source) of a pre-filtered vector query."""
        return self._search(self._knn_body(q, k, ef, flt), "run a vector query")

    def _hybrid_engine(self, text, q, pool, ef, flt) -> tuple:
        """The engine's bool + knn pool -> (hits, BM25 of each hit)."""
        hits = self._search(self._hybrid_body(text, q, pool, ef, flt), "run a hybrid query",
                            include_named_queries_score=True)
        # the engine ranks its pool by BM25 + its transformed knn score; the caller ranks it by
        # API.md's BM25 + vector similarity instead, with each hit's BM25 from its named-query
        # score (0 for a hit that only the knn clause found)
        named = [h.get("matched_queries") or {} for h in hits]
        if not all(isinstance(m, dict) for m in named):
            raise UnsupportedError(f"{self.engine} did not report per-query scores: hybrid search needs "
                                   "include_named_queries_score (Elasticsearch >= 8.8, OpenSearch >= 2.13)")
        return hits, np.array([float(m.get(LEXICAL, 0.0)) for m in named], dtype=np.float64) * self.bm25_scale

    def _hybrid_exact(self, text, q, pool, ef, flt) -> tuple:
        """exact=True: the lexical top-`pool` and the exact vector top-`pool` (every matching
        vector scored here) -> (hits, BM25 of each hit)."""
        lex = self._search(self._lexical_body(text, pool, flt))
        by_id = {h["_id"]: h for h in lex}
        for h in self._exact_hits(q, pool, flt):
            by_id.setdefault(h["_id"], h)
        bm = {h["_id"]: float(h["_score"]) * self.bm25_scale for h in lex}
        hits = list(by_id.values())
        return hits, np.array([bm.get(h["_id"], 0.0) for h in hits], dtype=np.float64)

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

    def _make_client(self, options: dict):
        from elasticsearch import Elasticsearch
        kw = {"request_timeout": float(options["timeout"]), "verify_certs": bool(options["verify_certs"]),
              "max_retries": 0, "retry_on_timeout": False}
        for key in ("basic_auth", "api_key", "ca_certs", "client_cert", "client_key"):
            if options.get(key) is not None:
                kw[key] = tuple(options[key]) if key == "basic_auth" else options[key]
        try:
            return Elasticsearch(options["hosts"], **kw)
        except (ValueError, TypeError) as e:
            raise ConfigError(self.redact(f"cannot configure the Elasticsearch client: {e}")) from None

    def _vector_mapping(self, options: dict) -> dict:
        return {"type": "dense_vector", "dims": self.vec.dim, "index": True,
                "similarity": self._SIMILARITY[self.metric],
                "index_options": {"type": "hnsw", "m": options["m"], "ef_construction": options["ef_construct"]}}

    def _knn(self, q, k, ef, flt) -> dict:
        knn = {"field": self.vec.name, "query_vector": [float(x) for x in q], "k": k, "num_candidates": ef}
        if flt:
            knn["filter"] = flt
        return knn

    def _knn_body(self, q, k, ef, flt) -> dict:
        return {"size": k, "knn": self._knn(q, k, ef, flt)}

    def _hybrid_body(self, text, q, size, ef, flt) -> dict:
        body = self._lexical_body(text, size, flt)
        body["query"]["bool"] = {"should": body["query"]["bool"]["must"], "filter": body["query"]["bool"]["filter"]}
        body["query"]["bool"]["should"][0]["multi_match"]["_name"] = LEXICAL
        body["knn"] = self._knn(q, size, ef, flt)
        return body

    def _streaming_bulk(self, client, actions, **kwargs):
        from elasticsearch.helpers import streaming_bulk
        return streaming_bulk(client, actions, retry_on_status=RETRY_STATUS, **kwargs)

    def failure(self, e):
        import elastic_transport
        from elasticsearch import ApiError
        if isinstance(e, ApiError):
            body = e.body if isinstance(e.body, dict) else {}
            err = body.get("error", {})
            reason = err.get("reason") if isinstance(err, dict) else err
            return e.meta.status, f"{e.message}: {reason or body or ''}"
        if isinstance(e, elastic_transport.TransportError):
            return None, f"{type(e).__name__}: {e.message}"
        return None
