"""storage="vespa": the DocumentArray API over Vespa's HTTP APIs (/document/v1 and /search/).

UNTESTED AGAINST A LIVE VESPA ENGINE: none can be installed on the machines this was
built on. The application package (app.py), the YQL (yql.py) and the HTTP exchange are
checked against pyvespa's builders, a YQL evaluator and recorded request/response shapes
from Vespa's documentation (tests/storages/remote/test_vespa.py).

The application must be deployed first (`application_package()` / `app.write_application`
give the files for `vespa deploy`). Writes go through /document/v1 (one request per
document: Vespa acknowledges a write when it is searchable, so writes are visible on
return); a failed document in a batch rolls the batch back like the Elasticsearch
storage does. Searches go through /search/ with YQL and the rank profiles `bm25`,
`closeness` and `hybrid`; vector scores are recomputed from the hits' vectors (as
API.md defines them) and filter-only results come in insertion order (`hs_seq`).
Text queries are compiled to YQL terms (lexical.py), never parsed by Vespa's userInput.
Iteration visits the document type through /document/v1 (continuation tokens), sorted
here by insertion number; `len()` is a match-all query's totalCount when coverage is
full, else a visit. Queries ask for at most `max_hits` hits (the package's maxHits).

API.md sections 7 and 8 run on Vespa: counts are totalCount, sorted finds use the
`sorting` parameter, facets are grouping, writes by condition are /document/v1
selection updates and deletes (selection.py). Text and hybrid finds run on the retrieval
primitives and query/executor.py fuses them; hybrid "sum" and "linear" keep Vespa's own
queries (`scored_pool`: the `hybrid` profile's weakAnd ∪ nearestNeighbor, or one query of every
text match and the vector top candidates) and the executor fuses their parts: the profile's
text_score match feature and the exact vector scores.
API.md section 10: every dense, sparse and multi-vector field is a tensor with its own rank
profile (app.py, tensors.py; docs/storages/vespa.md); each field's list is Vespa's matches
ranked again here by the exact score of their stored values (`_found`, `_ranked`), and the
executor fuses several lists, the text score of given ids coming from `bm25_of`.
What every remote storage shares (retries, redaction, rollback, document <-> fields,
exact rescoring) lives in ../base.py.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import urllib.parse
from typing import Iterator, Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.errors import BackendError, ConfigError, UnsupportedError
from hybridsearch.document import Kind
from hybridsearch.query.candidates import Candidates, ScoredPool
from hybridsearch.query.filters import And, Exists, MatchAll, Node
from hybridsearch.storages.base import exact_scores
from hybridsearch.storages.fieldscores import field_scores
from hybridsearch.storages.config import integer, one_of, option, path_or_none, StrPath
from hybridsearch.storages.remote.base import (ID_FIELD, PRESENT_FIELD, SEQ_FIELD, RemoteConfig,
                                               RemoteStorage, http_url, split_userinfo)
from hybridsearch.storages.remote.vespa import app as A
from hybridsearch.storages.remote.vespa import lexical as L
from hybridsearch.storages.remote.vespa import tensors as T
from hybridsearch.storages.remote.vespa import yql as Y
from hybridsearch.storages.remote.vespa.selection import NotSelectable, Selection

PAGE = 400  # documents per chunk when visiting
MARGIN = 8  # extra hits of a sparse or multi-vector query, so that rescoring cannot lose one to rounding
log = logging.getLogger("hybridsearch")


def application_package(model, doctype: Optional[str] = None, metric: str = "cosine", m: int = 16,
                        ef_construct: int = 200, max_hits: int = 10000) -> dict:
    """The application package (relative path -> text) a collection of `model` documents needs
    deployed before `hs.DocumentArray(model, storage="vespa", ...)` can open it; write it with
    `app.write_application(files, "app")` and deploy it with `vespa deploy app`."""
    from hybridsearch.document import schema_of
    schema = schema_of(model)
    return A.application_files(schema, doctype or schema.name.lower(), metric, m, ef_construct, max_hits)


def doc_path(namespace: str, doctype: str, id: str) -> str:
    """/document/v1 path of one document; the id is percent-encoded as one path segment
    (dots too, so `.` and `..` can never be read as path navigation)."""
    quoted = urllib.parse.quote(id, safe="").replace(".", "%2E")
    return f"/document/v1/{namespace}/{doctype}/docid/{quoted}"


def _vespa_name(what: str, allow_none: bool = False):
    def check(v):
        if v is None and allow_none:
            return None
        try:
            return A.check_name(v, what)
        except ConfigError as e:
            raise ValueError(f"a name Vespa accepts ({e})") from None
    return check


@dataclasses.dataclass(frozen=True)
class VespaConfig(RemoteConfig):
    """Options of storage="vespa"."""

    url: str = option("http://127.0.0.1:8080", http_url,
                      "the container's URL; a user:password@ in it is sent as basic auth, never shown",
                      secret=True)  # only the URL without user:password appears (stats, errors)
    namespace: str = option("hybridsearch", _vespa_name("namespace"), "the namespace of the /document/v1 ids")
    doctype: Optional[str] = option(None, _vespa_name("document type", True),
                                    "the document type (schema) of the package; None: the model's name, lowercased")
    m: int = option(16, integer(2), "max-links-per-node of the vector's HNSW index (in the package)")
    ef_construct: int = option(200, integer(1), "neighbors-to-explore-at-insert (in the package)")
    ef: int = option(100, integer(1), "candidates a vector query explores (hnsw.exploreAdditionalHits = "
                     "ef - limit); find(ef=...) overrides it")
    token: Optional[str] = option(None, None, "a bearer token (Vespa Cloud data plane)", secret=True)
    cert: Optional[StrPath] = option(None, path_or_none, "client certificate (mutual TLS)")
    key: Optional[StrPath] = option(None, path_or_none, "client key (mutual TLS)")
    text_grammar: str = option("weakAnd", one_of("weakAnd", "any", "all"),
                               "how query words combine: weakAnd (approximate OR), any (OR) or all (AND)")
    max_hits: int = option(10000, integer(1), "the most hits a query may ask for (the package's maxHits: "
                           "deploy and open with the same)")
    cluster: Optional[str] = option(None, _vespa_name("content cluster", True),
                                    "the content cluster to visit (len() and iteration); None: Vespa's choice")


class Refused(Exception):
    """One HTTP exchange that failed: the status (None: no response) and the reason."""

    def __init__(self, status: Optional[int], reason: str) -> None:
        super().__init__(status, reason)
        self.status, self.reason = status, reason


def _reason(data) -> Optional[str]:
    """What a Vespa error answer says: its `root.errors` (search) or its `message` (document API)."""
    if not isinstance(data, dict):
        return None
    errors = (data.get("root", {}) or {}).get("errors")
    if errors:
        return "; ".join(f"{e.get('summary', '')}: {e.get('message', '')}" for e in errors)
    return data.get("message")


class VespaStorage(RemoteStorage):
    """One Vespa document type, reached over HTTP (requests)."""

    name = "vespa"
    engine = "Vespa"
    remote_modes_why = ("its document type is deployed with the application package (`vespa deploy`) before any open, "
                        "so nothing exists or is created per collection; mode='either' (the default) opens it")
    Config = VespaConfig
    query_options = frozenset({"linear", "text_fields", "syntax", "operator"})
    named_vectors = True
    vector_kinds = frozenset({"sparse", "multi"})

    def __init__(self, schema, config: VespaConfig) -> None:
        import requests
        self._requests = requests
        # user:password in the URL becomes basic auth and leaves the URL, which errors and repr show
        self.url, basic = split_userinfo(config.url.rstrip("/"))
        super().__init__(schema, config, [config.token, basic and basic[1]], T.VespaCodec(schema))
        self.namespace = config.namespace
        self.doctype = config.doctype or schema.name.lower()
        A.check_name(self.doctype, "document type")
        self.m, self.ef_construct = config.m, config.ef_construct
        self.grammar = config.text_grammar
        self.max_hits, self.cluster = config.max_hits, config.cluster
        self.yql = Y.YqlFilter(schema)
        self.selection = Selection(schema, self.doctype)
        self.session = requests.Session()
        if config.cert:
            self.session.cert = (config.cert, config.key) if config.key else config.cert
        self.session.verify = config.ca_certs or bool(config.verify_certs)
        if config.token:
            self.session.headers["Authorization"] = f"Bearer {config.token}"
        elif basic:
            self.session.auth = basic
        A.schema_sd(schema, self.doctype, self.metrics, self.m, self.ef_construct)  # field names Vespa accepts
        self.next_seq = self._max_seq() + 1

    def address(self) -> dict:
        return {"url": self.url, "doctype": self.doctype}

    def application_package(self) -> dict:
        """Relative path -> text of the application package this collection needs deployed."""
        return A.application_files(self.schema, self.doctype, self.metrics, self.m, self.ef_construct,
                                   self.max_hits)

    # ------------------------------------------------------------ HTTP
    def failure(self, e):
        return (e.status, e.reason) if isinstance(e, Refused) else None

    def _send(self, method: str, path: str, params, body, ok) -> tuple:
        """One request -> (status, json); Refused when it fails or answers outside `ok`."""
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        req = self._requests.Request(method, url, data=json.dumps(body) if body is not None else None,
                                     headers={"Content-Type": "application/json"} if body is not None else None)
        prepared = self.session.prepare_request(req)
        # requests "requotes" URLs, turning %2E back into "." (an id ".." would become a
        # path step up): send the path exactly as encoded by doc_path
        prepared.url = url
        try:
            r = self.session.send(prepared, timeout=self.timeout)
        except self._requests.RequestException as e:
            raise Refused(None, f"{type(e).__name__}: {e}") from None
        try:
            data = r.json() if r.content else {}
        except ValueError:
            data = {"message": r.text[:300]}
        if r.status_code not in ok:
            raise Refused(r.status_code, _reason(data) or r.reason)
        return r.status_code, data

    def _http(self, method: str, path: str, what: str, params=None, body=None, ok=(200,)):
        """One request -> (status, json); 429/503 retried with backoff; errors -> BackendError."""
        return self.call(what, self._send, method, path, params, body, ok)

    def _hits(self, n: int) -> int:
        """n as a query's `hits`, if the deployed package's maxHits allows it."""
        if n > self.max_hits:
            raise UnsupportedError(f"storage 'vespa' returns at most max_hits={self.max_hits} hits per query "
                                   f"(the application package's maxHits) and {n} were needed: ask for fewer, or "
                                   "deploy the package with a larger max_hits and open the collection with it")
        return n

    def _visit(self, field_set: str) -> Iterator[dict]:
        """Every document of the type through /document/v1 visiting (a linear scan in chunks,
        chained by the continuation token until the response has none)."""
        params = {"wantedDocumentCount": PAGE, "fieldSet": field_set, "timeout": f"{self.timeout}s"}
        if self.cluster:
            params["cluster"] = self.cluster
        path = f"/document/v1/{self.namespace}/{self.doctype}/docid"
        continuation = None
        while True:
            _, data = self._http("GET", path, "visit documents",
                                 params={**params, "continuation": continuation} if continuation else params)
            yield from data.get("documents", [])
            continuation = data.get("continuation")
            if not continuation:
                return

    def _query(self, body: dict, what: str) -> dict:
        """The `root` of a /search/ answer; errors it reports -> BackendError."""
        _, data = self._http("POST", "/search/", what, body={"timeout": f"{self.timeout}s", **body})
        root = data.get("root", {})
        if root.get("errors"):
            raise self.error(what, 200, _reason(data))
        return root

    def _search(self, body: dict, what: str = "search") -> list:
        return list(self._query(body, what).get("children", []))

    # ---------------------------------------------------------- documents
    def _docs(self, hits: list) -> list:
        return [self.codec.document(h["fields"]) for h in hits]

    def _get_fields(self, id: str) -> Optional[dict]:
        status, data = self._http("GET", doc_path(self.namespace, self.doctype, id), "read a document", ok=(200, 404))
        return data.get("fields") if status == 200 else None

    def _put(self, id: str, fields: dict) -> None:
        self._http("POST", doc_path(self.namespace, self.doctype, id), "write a document", body={"fields": fields})

    def _remove(self, id: str) -> None:
        self._http("DELETE", doc_path(self.namespace, self.doctype, id), "delete a document")

    def _restore(self, items: list) -> bool:
        """Puts back (id, fields or None: delete), one request each (a failure raises)."""
        for i, fields in items:
            self._put(i, fields) if fields is not None else self._remove(i)
        return True

    # ------------------------------------------------------------- writes
    def upsert(self, batch: Batch) -> None:
        before, done, seq0 = {}, [], self.next_seq
        try:
            for doc in batch.docs:
                old = self._get_fields(doc.id)
                if old is not None:
                    before[doc.id] = old
                seq, = self.sequence([doc.id], before)
                self._put(doc.id, self.codec.fields(doc, seq))
                done.append(doc.id)
        except BackendError as e:
            raise BackendError(f"{e}; {self.rollback(self._restore, done, before, seq0)}") from None

    def delete(self, ids: list) -> int:
        n = 0
        for i in dict.fromkeys(ids):
            if self._get_fields(i) is not None:
                self._remove(i)
                n += 1
        return n

    def update_fields(self, id: str, values: dict) -> None:
        old = self._get_fields(id)
        if old is None:
            raise KeyError(id)
        if not values:
            return
        # a field set to None is removed: assign null clears it in Vespa
        update = {k: {"assign": v} for k, v in self.codec.update(old, values).items()}
        self._http("PUT", doc_path(self.namespace, self.doctype, id), "update a document", body={"fields": update})

    # -------------------------------------------------------------- reads
    def _max_seq(self) -> int:
        hits = self._search({"yql": f"select {SEQ_FIELD} from {self.doctype} where true "
                                     f"order by {SEQ_FIELD} desc limit 1", "hits": 1}, "read the insertion sequence")
        return int(hits[0]["fields"][SEQ_FIELD]) if hits else 0

    @staticmethod
    def _full_total(root: dict) -> Optional[int]:
        """totalCount of an answer when every node answered (coverage full), else None: a
        partial count is never reported."""
        coverage = root.get("coverage", {})
        if not root.get("errors") and coverage.get("full") is True and not coverage.get("degraded"):
            return int(root.get("fields", {}).get("totalCount", 0))
        return None

    def _total(self, cond: str, what: str, params: Optional[dict] = None) -> Optional[int]:
        """totalCount of a query asking no hits, or None unless coverage is full."""
        body = {"yql": Y.select(self.doctype, cond), "hits": 0, "timeout": f"{self.timeout}s", **(params or {})}
        _, data = self._http("POST", "/search/", what, body=body)
        return self._full_total(data.get("root", {}))

    def count(self) -> int:
        """totalCount of a match-all query when every node answered (coverage full); otherwise
        the documents are counted by visiting them, rather than reporting a partial count."""
        total = self._total("true", "count documents")
        return total if total is not None else sum(1 for _ in self._visit("[id]"))

    def _text(self, text, target: Optional[int] = None) -> tuple:
        """(YQL condition, request parameters) of a text query: its terms (lexical.py) and the
        weights of the fields it searches. `target`: the hits a ranked query keeps, which the
        `text_grammar` weakAnd may prune to; None: every match is wanted (counts, facets,
        sorted finds, linear fusion), so weakAnd gives way to a plain OR."""
        self.need_texts()
        raw, fields, operator = L.parts(text, self.texts)
        grammar = "any" if target is None and self.grammar == "weakAnd" else self.grammar
        cond = L.condition(raw, [f for f, _ in fields], operator, grammar, target)
        return cond, L.weights(fields)

    def _match(self, node: Optional[Node], text, target: Optional[int] = None) -> tuple:
        """(YQL condition, parameters) of the documents a count, facet or sorted find covers:
        those matching `node` and, with `text`, those the text query matches (`_text`)."""
        where = self._where(node)
        if text is None:
            return where or "true", {}
        cond, params = self._text(text, target)
        return (cond if where is None else f"{cond} and {where}"), params

    def count_matches(self, node: Optional[Node], text) -> int:
        """totalCount of the query a filter-only or text find runs, asking no hits; with
        partial coverage, the generic count of the matches. (The generic count alone would ask
        for every match in one query, beyond max_hits on a large collection.)"""
        cond, params = self._match(node, text)
        total = self._total(cond, "count text matches" if text is not None else "count matches", params)
        return total if total is not None else super().count_matches(node, text)

    def contains(self, id: str) -> bool:
        return self._get_fields(id) is not None

    def get(self, ids: list) -> list:
        out = []
        for i in ids:
            f = self._get_fields(i)
            out.append(self.codec.document(f) if f is not None else None)
        return out

    def _scan(self, where: str, limit: Optional[int]) -> list:
        """Matching hits in insertion order, max_hits a page, paged on hs_seq (no deep offsets)."""
        hits, last = [], None
        while limit is None or len(hits) < limit:
            size = self.max_hits if limit is None else min(self.max_hits, limit - len(hits))
            cond = where if last is None else f"({where}) and {SEQ_FIELD} > {Y.number_literal(last)}"
            page = self._search({"yql": Y.select(self.doctype, cond, order_by_seq=True), "hits": size},
                                "list documents")
            hits += page
            if len(page) < size:
                break
            last = int(page[-1]["fields"][SEQ_FIELD])
        return hits

    def iter_ids(self) -> Iterator[str]:
        # visiting returns documents in bucket order: sorted here by the insertion number
        rows = []
        for d in self._visit(f"{self.doctype}:{ID_FIELD},{SEQ_FIELD}"):
            f = d.get("fields", {})
            if ID_FIELD not in f or SEQ_FIELD not in f:
                raise BackendError(f"Vespa document {d.get('id')!r} was not written by hybridsearch (it has no "
                                   f"{ID_FIELD} / {SEQ_FIELD}): the document type is shared with another writer")
            rows.append((int(f[SEQ_FIELD]), f[ID_FIELD]))
        rows.sort()
        return iter([i for _, i in rows])

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        if limit == 0:
            return [], []
        docs = self._docs(self._scan(self.yql.compile(node), limit))
        return [d.id for d in docs], docs

    # ------------------------------------------- API.md section 7, on Vespa
    def search_sorted(self, node: Optional[Node], text, keys: list, limit: Optional[int]) -> tuple:
        """Vespa sorts (yql.sort_spec: the keys, missing values last, then BM25 with text, then
        insertion order) in one query of up to max_hits hits; a longer result pages on with
        `offset`. totalCount of the first answer is the total (sorting.degrading off: Vespa
        would otherwise count approximately when the first key is a fast-search number). Keys
        Vespa cannot order as API.md does (sort_spec) take the generic path."""
        spec = Y.sort_spec(self.schema, keys, text is not None)
        if spec is None:
            return super().search_sorted(node, text, keys, limit)
        cond, params = self._match(node, text)
        body = {"yql": Y.select(self.doctype, cond), "ranking": "bm25" if text is not None else "unranked",
                "sorting": spec, "sorting.degrading": False, **params}
        hits, total = [], None
        while limit is None or len(hits) < limit:
            size = self.max_hits if limit is None else min(self.max_hits, limit - len(hits))
            page = {"hits": size, "offset": len(hits)} if hits else {"hits": size}
            root = self._query({**body, **page}, "run a sorted query")
            if not hits:
                total = self._full_total(root)
            got = root.get("children", [])
            hits += got
            if len(got) < size:
                break
        docs = self._docs(hits)
        scores = np.array([h.get("relevance", 0.0) if text is not None else 0.0 for h in hits], dtype=np.float32)
        if total is None:
            total = self.count_matches(node, text)
        return [d.id for d in docs], scores, docs, total

    def _grouping(self, cond: str, params: dict, grouping: str, what: str) -> Optional[dict]:
        """label or group-list id -> its groups, from one grouping query asking no hits; None
        unless every node answered (a partial count is never reported)."""
        root = self._query({"yql": f"{Y.select(self.doctype, cond)} | {grouping}", "hits": 0, **params}, what)
        if self._full_total(root) is None:
            return None
        lists = {}
        for group in root.get("children", []):
            if not str(group.get("id", "")).startswith("group:root"):
                continue
            for gl in group.get("children", []):
                lists[gl.get("label", gl.get("id"))] = gl.get("children", [])
        return lists

    def _facet_match(self, field: str, node: Optional[Node], text) -> tuple:
        """`_match` restricted to documents holding the field when it is optional: Vespa groups
        a missing value as the attribute's "undefined" one ("" for a string, false for a
        bool), which a stored value can share."""
        spec = self.schema.fields[field]
        if spec.optional:
            node = Exists(field) if node is None else And((node, Exists(field)))
        return self._match(node, text)

    def facets(self, field: str, node: Optional[Node], text, limit: int, ranges: Optional[list]) -> list:
        """Vespa grouping: `limit` (and one more) most frequent values by count, or one
        predefined bucket per range, in one query. When the last value kept ties with the
        first left out, the query is asked again with twice as many groups, so that ties are
        broken by value here. With partial coverage, the generic count of the matches."""
        kind = self.schema.fields[field].kind
        cond, params = self._facet_match(field, node, text)
        if ranges is not None:
            buckets = Y.range_buckets(kind, ranges)
            lists = {} if all(b is None for _, b in buckets) else self._grouping(
                cond, params, Y.range_grouping(field, buckets), "count facet ranges")
            if lists is None:
                return super().facets(field, node, text, limit, ranges)
            return [((lo, hi), sum(int(g.get("fields", {}).get("count()", 0)) for g in lists.get(label, [])))
                    for (lo, hi), (label, _) in zip(ranges, buckets)]
        if limit == 0:
            return []
        n = limit + 1
        while True:
            lists = self._grouping(cond, params, Y.value_grouping(field, n), "count facet values")
            if lists is None:
                return super().facets(field, node, text, limit, ranges)
            groups = next(iter(lists.values()), [])
            pairs = sorted(((T.group_value(kind, g), int(g.get("fields", {}).get("count()", 0))) for g in groups),
                           key=lambda p: (-p[1], p[0]))
            # complete when Vespa had no more groups, or the count at the cut is above every
            # count left out (the (n)th, the smallest returned, bounds them)
            if len(groups) < n or pairs[limit - 1][1] > pairs[-1][1]:
                return pairs[:limit]
            n *= 2

    # --------------------------------------------- writes by condition
    def _by_selection(self, method: str, selection: str, body: Optional[dict], what: str, done: str) -> int:
        """A /document/v1 delete or update where `selection` is true, chunk after chunk
        (continuation tokens) -> the documents it changed (documentCount of each chunk)."""
        params = {"selection": selection, "cluster": self.cluster or A.CONTENT_CLUSTER,
                  "timeChunk": f"{max(1.0, self.timeout / 2)}s", "timeout": f"{self.timeout}s"}
        path = f"/document/v1/{self.namespace}/{self.doctype}/docid"
        n, continuation = 0, None
        while True:
            try:
                _, data = self._http(method, path, what, body=body,
                                     params={**params, "continuation": continuation} if continuation else params)
            except BackendError as e:
                raise BackendError(f"{e}; {n} documents were {done} by the chunks that finished and the failed "
                                   f"one may have {done} more, which Vespa has no multi-document transaction to "
                                   "undo") from None
            n += int(data.get("documentCount", 0))
            continuation = data.get("continuation")
            if not continuation:
                return n

    def _selection(self, node: Node) -> Optional[str]:
        """The node as a document selection, or None (logged) when the language cannot say it."""
        try:
            return self.selection.compile(node)
        except NotSelectable as e:
            log.info("Vespa at %s: the filter is not a document selection (%s); the matching ids are found "
                     "by a query and written one request each", self.where(), e)
            return None

    def delete_where(self, node: Node) -> int:
        """A /document/v1 delete where the filter's selection is true, run by Vespa; a filter
        the selection language cannot say deletes the ids a query finds instead."""
        sel = self._selection(node)
        if sel is None:
            return super().delete_where(node)
        return self._by_selection("DELETE", sel, None, "delete documents by condition", "deleted")

    def _assignments(self, values: dict) -> Optional[dict]:
        """The update of every matching document, or None when it depends on the document:
        unindexed fields live in one JSON string per document, and an optional field set on
        some documents and cleared on others would both add to and remove from hs_present."""
        if set(values) & set(self.codec.extra):
            return None
        fields = {}
        for name, v in values.items():
            if name in self.codec.kinds:  # a vector field of any kind (and a sparse one's keys)
                fields.update({k: {"assign": e} for k, e in self.codec.engine_values(name, v).items()})
            else:
                fields[name] = {"assign": v}
        # hs_present as VespaCodec.fields writes it: a sparse {} is removed, like None, and an
        # optional one's {} would also add its marker (per document then: both in one field)
        sparse = [n for n in values if self.schema.fields[n].kind is Kind.SPARSE]
        if any(values[n] == {} and self.schema.fields[n].optional for n in sparse):
            return None
        listed = [n for n in values if self.schema.fields[n].optional or n in sparse]
        added = [n for n in listed if values[n] is not None and (n not in sparse or values[n])]
        removed = [n for n in listed if n not in added]
        removed += [T.empty_marker(n) for n in sparse if values[n] is None]  # its {} would linger
        if added and removed:
            return None
        if added or removed:
            # add may repeat a name already there: hs_present is only ever searched with contains
            fields[PRESENT_FIELD] = {"add": added} if added else {"remove": removed}
        return {"fields": fields}

    def update_where(self, node: Node, values: dict) -> int:
        """A /document/v1 update where the filter's selection is true (assign of each value),
        run by Vespa -> the documents it updated. An update that differs per document
        (`_assignments`) or a filter the selection language cannot say updates the ids a
        query finds, one request each."""
        if not values:
            return self.count_matches(node, None)
        update = self._assignments(values)
        sel = self._selection(node) if update is not None else None
        if sel is None:
            return super().update_where(node, values)
        return self._by_selection("PUT", sel, update, "update documents by condition", "updated")

    # ------------------------------------------------------------ vectors
    def _where(self, node: Optional[Node]) -> Optional[str]:
        return None if node is None or isinstance(node, MatchAll) else self.yql.compile(node)

    def _field(self, field: Optional[str]) -> str:
        """The vector field a search names (None: the schema's one dense field)."""
        if field is None:
            self.need_vector()
            return self.vec.name
        return field

    def _field_body(self, field: str, one, n: int, ef: int, where: Optional[str], exact: bool) -> dict:
        """The request of a field's top-n for one query (`one`: a dense (d,) array, a sparse
        (indices, values) pair or an (m, d) block), ranked by the field's profile: a dense field
        by nearestNeighbor (exact=True: no graph); a sparse one matching every document sharing
        a key (dotProduct) and a multi-vector one every document holding it, each match ranked
        by the profile's exact expression."""
        profile, qname = A.field_profile(self.schema, field)
        spec = self.schema.fields[field]
        if spec.kind is Kind.SPARSE:
            cond = Y.dot_product(A.keys_field(field), one[0].tolist())
            value = T.sparse_query(*one)
        elif spec.kind is Kind.MULTI:
            cond = f"{PRESENT_FIELD} contains {Y.string_literal(field)}" if spec.optional else None
            value = T.multi_query(one)
        else:
            cond = Y.nearest_neighbor(field, n, ef, approximate=not exact, query=qname)
            value = [float(x) for x in np.asarray(one, dtype=np.float32).reshape(-1)]
        if where is not None:
            cond = where if cond is None else f"{cond} and {where}"
        # equal scores are cut by insertion order (API.md), so Vespa cuts them so too
        return {"yql": Y.select(self.doctype, cond or "true"), "hits": self._hits(n), "ranking": profile,
                "sorting": f"-[relevance] +{SEQ_FIELD}", f"input.query({qname})": value}

    def _one(self, field: str, query):
        """The one query of a primitive's argument: (1, d) dense, or a list holding one checked
        sparse or multi-vector query (as DocumentArray passes them)."""
        if self.schema.fields[field].kind is Kind.VECTOR:
            return np.asarray(query, dtype=np.float32).reshape(-1)
        return query[0]

    def _found(self, field: str, one, k: int, where: Optional[str], exact: bool, ef: Optional[int]) -> list:
        """The hits' records among which the field's top-k of `one` is. Dense: Vespa's k nearest
        (their order is the metric's up to float rounding). Sparse and multi-vector: every match
        is ranked by the profile's expression in float precision, so k + MARGIN are read (Vespa
        cutting equal scores by insertion: `sorting`), and more while the k-th ties with the last
        up to rounding; a tie still there at max_hits is refused (UnsupportedError), as a
        document beyond it could belong in the top-k. Dense with exact=True reads k + MARGIN too."""
        kind = self.schema.fields[field].kind
        if kind is Kind.VECTOR:
            # exact: Vespa's distances are float, so a margin keeps a neighbour rounding moved out
            n = min(k + MARGIN, max(self.max_hits, k)) if exact else k
            body = self._field_body(field, one, n, max(ef or self.ef, n), where, exact)
            return self._hit_records(self._search(body, "run a vector query"))
        if kind is Kind.SPARSE and len(one[0]) == 0:
            return []  # an empty query matches nothing
        m = min(k + MARGIN, max(self.max_hits, k))
        while True:
            hits = self._search(self._field_body(field, one, m, 0, where, True), "run a vector query")
            if len(hits) < m:
                return self._hit_records(hits)
            kth, last = float(hits[k - 1]["relevance"]), float(hits[-1]["relevance"])
            if kth - last > 1e-5 * max(1.0, abs(kth)):
                return self._hit_records(hits)
            if m >= self.max_hits:  # a document beyond the last hit may tie (up to rounding) with the k-th
                raise self._beyond_max_hits(f"the {k}-th best of field {field!r} ties with every hit after it")
            m = min(2 * m, self.max_hits)

    def _exact(self, field: str, values: list, one) -> np.ndarray:
        """API.md's score of each value of `field` (None: the document has none, NaN) for `one`,
        float64: the metric's similarity, the exact dot product, MaxSim."""
        kind = self.schema.fields[field].kind
        name = "dense" if kind is Kind.VECTOR else "sparse" if kind is Kind.SPARSE else "multi"
        return field_scores(name, self.metrics.get(field, "ip"), values, one)

    def _ranked(self, records: list, field: str, one, k: int) -> tuple:
        """(records, scores float32) of the records holding a value of `field`, best first by
        API.md's exact score computed here from the stored values (ties in insertion order),
        cut to k."""
        records = sorted(records, key=lambda r: int(r[SEQ_FIELD]))
        scores = self._exact(field, [self.codec.value(field, r) for r in records], one)
        keep = np.flatnonzero(~np.isnan(scores))
        order = keep[np.argsort(-scores[keep], kind="stable")[:k]]
        return [records[i] for i in order.tolist()], scores[order].astype(np.float32)

    def search_vectors(self, queries, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int], field: Optional[str] = None) -> list:
        field = self._field(field)
        where = self._where(node)
        out = []
        for q in queries:
            one = np.asarray(q, dtype=np.float32).reshape(-1) if self.schema.fields[field].kind is Kind.VECTOR else q
            ranked, scores = self._ranked(self._found(field, one, limit, where, exact, ef), field, one, limit)
            out.append(([r[ID_FIELD] for r in ranked], scores, [self.codec.document(r) for r in ranked]))
        return out

    # ------------------------------------- retrieval primitives (query/executor.py fuses)
    def _hit_records(self, hits: list) -> list:
        return [h["fields"] for h in hits]

    def text_top(self, text, k: int, node: Optional[Node]) -> Candidates:
        """The `bm25` profile's top-k (the text grammar's weakAnd prunes to its targetHits)."""
        cond, params = self._match(node, text, k)
        hits = self._search({"yql": Y.select(self.doctype, cond), "hits": self._hits(k), "ranking": "bm25",
                             **params}, "run a text query")
        return self.lexical_list(text, node, self._hit_records(hits), [h["relevance"] for h in hits], k)

    def text_matches(self, text, node: Optional[Node]) -> Candidates:
        """Every match (the terms ORed), in one query of at most max_hits hits."""
        cond, params = self._match(node, text)
        hits = self._search({"yql": Y.select(self.doctype, cond), "hits": self.max_hits, "ranking": "bm25",
                             **params}, "run a text query")
        if len(hits) >= self.max_hits:
            raise self._beyond_max_hits("every text match is needed here")
        return self.lexical_list(text, node, self._hit_records(hits), [h["relevance"] for h in hits], None)

    def bm25_of(self, text, ids: list) -> dict:
        """id -> the `bm25` profile's score (best-field BM25) of those of `ids` the text query
        matches: its terms ORed, restricted to the ids (BM25 does not depend on the other
        clauses), a chunk of PAGE ids per query."""
        cond, params = self._text(text)
        out = {}
        for a in range(0, len(ids), PAGE):
            chunk = ids[a:a + PAGE]
            only = " or ".join(f"{ID_FIELD} contains {Y.string_literal(i)}" for i in chunk)
            hits = self._search({"yql": Y.select(self.doctype, f"{cond} and ({only})"), "hits": self._hits(len(chunk)),
                                 "ranking": "bm25", **params}, "score documents by text")
            out.update({h["fields"][ID_FIELD]: float(h["relevance"]) for h in hits})
        return out

    def records_of(self, ids: list) -> dict:
        out = {}
        for i in ids:
            f = self._get_fields(i)
            if f is not None:
                out[i] = f
        return out

    def vector_top(self, query, k: int, node: Optional[Node], exact: bool, ef: Optional[int],
                   field: Optional[str] = None) -> Candidates:
        """The field's top-k: Vespa's candidates (`_found`) ranked by the exact score."""
        field = self._field(field)
        one = self._one(field, query)
        ranked, scores = self._ranked(self._found(field, one, k, self._where(node), exact, ef), field, one, k)
        return self.candidates(ranked, scores, docs=True, vectors=True)

    def field_scores(self, field: str, records: list, query) -> np.ndarray:
        values = [self.codec.value(field, r) if r is not None else None for r in records]
        return self._exact(field, values, self._one(field, query))

    def scored_pool(self, plan) -> ScoredPool:
        """Hybrid "sum" and "linear" on Vespa's `hybrid` rank profile, each candidate's parts its
        `text_score` match feature (BM25 of the best field) and the exact vector score of its
        vector; query/executor.py fuses them.

        - "sum" (third edition): Vespa's own `nearestNeighbor(targetHits: candidates) or
          weakAnd(...)`, ranked by the profile's text_score + similarity, `want` hits: the
          candidates are what weakAnd exposes (about its targetHits best, by its own pruning
          score) with the vector top-`candidates`, as the issue defines the edition;
        - "linear", and "sum" with exact=True: one query of the vector top-`candidates` and every
          text match (the terms ORed), all of them returned (more than max_hits: refused); the
          candidates are the text matches (exact=True) or their top-`candidates` by text_score,
          with the `candidates` best of the answer by exact vector score."""
        if plan.text is None or plan.vector is None or self.vec is None or \
                plan.vectors[0].field not in (None, self.vec.name):
            return None  # other lists (API.md section 10): the executor fuses the primitives' lists
        self.need_texts()
        q = np.asarray(plan.vector, dtype=np.float32).reshape(-1)
        c, where = plan.candidates, self._where(plan.node)
        ef = max(plan.ef or self.ef, c)
        if plan.fusion == "sum" and not plan.exact:
            hits = self._search(self._hybrid_body(plan.text, q, plan.want, where, c, ef, False), "run a hybrid query")
            return self._pool(self._hit_records(hits), q)
        hits = self._search(self._hybrid_body(plan.text, q, self.max_hits, where, c, ef, plan.exact, every_match=True),
                            "run a linear fusion query" if plan.fusion == "linear" else "run a hybrid query")
        if len(hits) >= self.max_hits:
            raise self._beyond_max_hits("fusion=\"linear\" normalises over every candidate (the text matches and the "
                                        "vector top candidates)" if plan.fusion == "linear" else
                                        "fusion=\"sum\" with exact=True scores every text match")
        records = sorted(self._hit_records(hits), key=lambda r: int(r[SEQ_FIELD]))  # ties: insertion order
        pool = self._pool(records, q)
        holding = np.array([self.vec.name in r for r in records], dtype=bool)
        with_vector = np.flatnonzero(holding)
        by_vector = with_vector[np.argsort(-pool.vector[with_vector].astype(np.float64), kind="stable")[:c]]
        matched = np.flatnonzero(pool.text > 0)
        if not plan.exact:  # the lexical top-`candidates`
            matched = matched[np.argsort(-pool.text[matched].astype(np.float64), kind="stable")[:c]]
        keep = np.union1d(by_vector, matched)
        return ScoredPool(pool.keys[keep], pool.order[keep], [pool.docs[i] for i in keep.tolist()],
                          pool.text[keep], pool.vector[keep])

    def _pool(self, records: list, q: np.ndarray) -> ScoredPool:
        """The records with their parts: the `text_score` match feature (the profile declares it)
        and the exact vector score (NaN without a vector: the executor fuses it as 0, as scores_of's)."""
        text = []
        for r in records:
            feats = r.get("matchfeatures")
            if not isinstance(feats, dict) or A.TEXT_SCORE not in feats:
                raise self.refused("run a hybrid query", f"a hit came back without the {A.TEXT_SCORE!r} match "
                                   "feature: deploy the application package of application_package()")
            text.append(float(feats[A.TEXT_SCORE]))
        found = self.candidates(records, np.zeros(len(records)), vectors=True)
        X = self.vectors(records).reshape(len(records), self.vec.dim)
        vector = exact_scores(X, q, self.metric).astype(np.float32)
        # the zero vectors stand in for none: their score (-|q| on l2) is no part score
        vector[[self.vec.name not in r for r in records]] = np.nan
        return ScoredPool(found.keys, found.order, found.docs, np.array(text, dtype=np.float32), vector)

    def _beyond_max_hits(self, why: str) -> UnsupportedError:
        return UnsupportedError(f"storage 'vespa' returns at most max_hits={self.max_hits} hits per query and {why}, "
                                "which may be more: narrow the query with a filter, or deploy and open the collection "
                                "with a larger max_hits")

    def _hybrid_body(self, text, q: np.ndarray, hits: int, where: Optional[str], pool: int, ef: int,
                     exact: bool, every_match: bool = False) -> dict:
        """One query over the vector top-`pool` or the text matches, ranked by `hybrid`."""
        tcond, params = self._text(text, None if every_match else hits)
        nn = Y.nearest_neighbor(self.vec.name, pool, ef, approximate=not exact, query=A.field_profile(
            self.schema, self.vec.name)[1])
        cond = f"({nn} or {tcond})" + ("" if where is None else f" and {where}")
        return {"yql": Y.select(self.doctype, cond), "hits": self._hits(hits), "ranking": "hybrid",
                "input.query(q)": [float(x) for x in q], **params}

    def close(self) -> None:
        self.session.close()
