"""storage="vespa": the DocumentArray API over Vespa's HTTP APIs (/document/v1 and /search/).

UNTESTED AGAINST A LIVE VESPA ENGINE: none can be installed on the machines this was
built on. The application package (vespa_app), the YQL (vespa_yql) and the HTTP
exchange are checked against pyvespa's builders, a YQL evaluator and recorded
request/response shapes from Vespa's documentation (tests/test_vespa.py).

The application must be deployed first (`application_package()` / `write_application`
give the files for `vespa deploy`). Writes go through /document/v1 (one request per
document: Vespa acknowledges a write when it is searchable, so writes are visible on
return); a failed document in a batch rolls the batch back like the Elasticsearch
storage does. Searches go through /search/ with YQL and the rank profiles `bm25`,
`closeness` and `hybrid`; vector scores are recomputed from the hits' vectors (as
API.md defines them) and filter-only results come in insertion order (`hs_seq`).
Iteration visits the document type through /document/v1 (continuation tokens), sorted
here by insertion number; `len()` is a match-all query's totalCount when coverage is
full, else a visit. Queries ask for at most `max_hits` hits (the package's maxHits).
"""
from __future__ import annotations

import dataclasses
import json
import time
import urllib.parse
from typing import Iterator, Optional

import numpy as np

from hybridsearch.batch import Batch
from hybridsearch.document import Kind
from hybridsearch.errors import BackendError, ConfigError, UnsupportedError
from hybridsearch.query.filters import MatchAll, Node
from hybridsearch.query.fusion import fuse_rrf
from hybridsearch.storages.base import Storage
from hybridsearch.storages.config import GraphConfig, boolean, integer, number, one_of, option, path_or_none
from hybridsearch.storages.remote.vespa import app as A
from hybridsearch.storages.remote.vespa import yql as Y

_RETRY_STATUS = (429, 503)
_PAGE = 400


def application_package(model, doctype: Optional[str] = None, metric: str = "cosine", m: int = 16,
                        ef_construct: int = 200, max_hits: int = 10000) -> dict:
    """The application package (relative path -> text) a collection of `model` documents needs
    deployed before `hs.DocumentArray(model, storage="vespa", ...)` can open it; write it with
    `vespa_app.write_application(files, "app")` and deploy it with `vespa deploy app`."""
    from hybridsearch.document import schema_of
    schema = schema_of(model)
    return A.application_files(schema, doctype or schema.name.lower(), metric, m, ef_construct, max_hits)


def doc_path(namespace: str, doctype: str, id: str) -> str:
    """/document/v1 path of one document; the id is percent-encoded as one path segment
    (dots too, so `.` and `..` can never be read as path navigation)."""
    quoted = urllib.parse.quote(id, safe="").replace(".", "%2E")
    return f"/document/v1/{namespace}/{doctype}/docid/{quoted}"


def _url(v):
    if not isinstance(v, str) or not v.startswith(("http://", "https://")):
        raise ValueError("an http(s) URL")
    return v


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
class VespaConfig(GraphConfig):
    """Options of storage="vespa"."""

    url: str = option("http://127.0.0.1:8080", _url, "the container's URL (user:password@ becomes basic auth)")
    namespace: str = option("hybridsearch", _vespa_name("namespace"), "document namespace")
    doctype: Optional[str] = option(None, _vespa_name("document type", True), "document type; None: the schema's name")
    ef: int = option(100, integer(1), "hnsw.exploreAdditionalHits base of a vector query")
    timeout: float = option(30.0, number(0), "seconds per request")
    max_retries: int = option(3, integer(0), "resends of a request refused with 429 / 503")
    retry_backoff: float = option(0.5, number(0), "seconds before the first resend, doubled after each")
    token: Optional[str] = option(None, None, "a bearer token (Vespa Cloud data plane)", secret=True)
    cert: Optional[str] = option(None, path_or_none, "client certificate (mutual TLS)")
    key: Optional[str] = option(None, path_or_none, "client key (mutual TLS)")
    ca_certs: Optional[str] = option(None, path_or_none, "CA bundle for https")
    verify_certs: bool = option(True, boolean, "verify the server's certificate")
    text_grammar: str = option("weakAnd", one_of("weakAnd", "any", "all"), "how query words combine")
    max_hits: int = option(10000, integer(1), "the query profile's maxHits (largest limit)")
    cluster: Optional[str] = option(None, _vespa_name("content cluster", True), "content cluster name")


class VespaStorage(Storage):
    """One Vespa document type, reached over HTTP (requests)."""

    name = "vespa"
    Config = VespaConfig

    def __init__(self, schema, config: VespaConfig) -> None:
        super().__init__(schema, config)
        options = config.as_dict()
        import requests
        self._requests = requests
        self._token = options.get("token")
        self.options = {k: v for k, v in options.items() if k != "token"}
        # user:password in the URL becomes basic auth and leaves the URL, which errors and repr show
        parts = urllib.parse.urlsplit(options["url"].rstrip("/"))
        basic = None
        if parts.username is not None or parts.password is not None:
            basic = (urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or ""))
            host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else (parts.hostname or "")
            parts = parts._replace(netloc=host + (f":{parts.port}" if parts.port else ""))
        self.url = urllib.parse.urlunsplit(parts)
        self._secrets = [x for x in (self._token, basic and basic[1]) if x]
        self.namespace = options["namespace"]
        self.doctype = options["doctype"] or schema.name.lower()
        A.check_name(self.doctype, "document type")
        self.metric = options["metric"]
        self.ef = options["ef"]
        self.m, self.ef_construct = options["m"], options["ef_construct"]
        self.timeout = float(options["timeout"])
        self.max_retries, self.retry_backoff = options["max_retries"], float(options["retry_backoff"])
        self.grammar = options["text_grammar"]
        self.max_hits, self.cluster = options["max_hits"], options["cluster"]
        self.vec = schema.vector
        self.texts = [s.name for s in schema.texts]
        self.extra = [s.name for s in schema.fields.values() if s.kind is Kind.OTHER]
        self.yql = Y.YqlFilter(schema)
        self.session = requests.Session()
        if options.get("cert"):
            self.session.cert = (options["cert"], options["key"]) if options.get("key") else options["cert"]
        self.session.verify = options["ca_certs"] or bool(options["verify_certs"])
        if self._token:
            self.session.headers["Authorization"] = f"Bearer {self._token}"
        elif basic:
            self.session.auth = basic
        A.schema_sd(schema, self.doctype, self.metric, self.m, self.ef_construct)  # field names Vespa accepts
        self.next_seq = self._max_seq() + 1

    def __repr__(self) -> str:
        return f"VespaStorage(url={self.url!r}, doctype={self.doctype!r})"

    def application_package(self) -> dict:
        """Relative path -> text of the application package this collection needs deployed."""
        return A.application_files(self.schema, self.doctype, self.metric, self.m, self.ef_construct,
                                   self.max_hits)

    # ------------------------------------------------------------ HTTP
    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _http(self, method: str, path: str, what: str, params=None, body=None, ok=(200,)):
        """One request -> (status, json); 429/503 retried with backoff; errors -> BackendError."""
        for attempt in range(self.max_retries + 1):
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
                raise BackendError(self._redact(f"Vespa at {self.url} failed to {what} (no response): "
                                                f"{type(e).__name__}: {e}")) from None
            if r.status_code in _RETRY_STATUS and attempt < self.max_retries:
                time.sleep(self.retry_backoff * (2 ** attempt))
                continue
            try:
                data = r.json() if r.content else {}
            except ValueError:
                data = {"message": r.text[:300]}
            if r.status_code not in ok:
                reason = data.get("message") if isinstance(data, dict) else None
                errors = (data.get("root", {}) or {}).get("errors") if isinstance(data, dict) else None
                if errors:
                    reason = "; ".join(f"{e.get('summary', '')}: {e.get('message', '')}" for e in errors)
                raise BackendError(self._redact(f"Vespa at {self.url} failed to {what} (status {r.status_code}): "
                                                f"{reason or r.reason}"))
            return r.status_code, data

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
        params = {"wantedDocumentCount": _PAGE, "fieldSet": field_set, "timeout": f"{self.timeout}s"}
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

    def _search(self, body: dict, what: str = "search") -> list:
        body = {"timeout": f"{self.timeout}s", **body}
        _, data = self._http("POST", "/search/", what, body=body)
        root = data.get("root", {})
        if root.get("errors"):
            raise BackendError(self._redact(f"Vespa at {self.url} failed to {what}: " + "; ".join(
                f"{e.get('summary', '')}: {e.get('message', '')}" for e in root["errors"])))
        return list(root.get("children", []))

    # ---------------------------------------------------------- documents
    def _fields(self, doc, seq: int) -> dict:
        fields = {A.ID_FIELD: doc.id, A.SEQ_FIELD: seq,
                  A.PRESENT_FIELD: [s.name for s in self.schema.fields.values()
                                    if s.optional and getattr(doc, s.name) is not None]}
        for spec in self.schema.fields.values():
            if spec.kind in (Kind.ID, Kind.OTHER):
                continue
            v = getattr(doc, spec.name)
            if v is None:
                continue
            fields[spec.name] = {"values": [float(x) for x in v]} if spec.kind is Kind.VECTOR else v
        if self.extra:
            fields[A.EXTRA_FIELD] = doc.model_dump_json(include=set(self.extra))
        return fields

    def _tensor(self, v):
        """A tensor field as Vespa returns it ({"values": [...]}, {"cells": [...]} or a list) -> list."""
        if isinstance(v, dict):
            if "values" in v:
                return v["values"]
            if "cells" in v:
                cells = v["cells"]
                out = [0.0] * self.vec.dim
                for c in cells:
                    out[int(c["address"]["x"])] = c["value"]
                return out
        return v

    def _doc(self, fields: dict):
        data = {"id": fields[A.ID_FIELD]}
        for spec in self.schema.fields.values():
            if spec.kind in (Kind.ID, Kind.OTHER) or spec.name not in fields:
                continue
            v = fields[spec.name]
            data[spec.name] = self._tensor(v) if spec.kind is Kind.VECTOR else v
        if self.extra and A.EXTRA_FIELD in fields:
            data.update(json.loads(fields[A.EXTRA_FIELD]))
        return self.schema.model.model_validate(data)

    def _get_fields(self, id: str) -> Optional[dict]:
        status, data = self._http("GET", doc_path(self.namespace, self.doctype, id), "read a document", ok=(200, 404))
        return data.get("fields") if status == 200 else None

    def _put(self, id: str, fields: dict) -> None:
        self._http("POST", doc_path(self.namespace, self.doctype, id), "write a document", body={"fields": fields})

    def _remove(self, id: str) -> None:
        self._http("DELETE", doc_path(self.namespace, self.doctype, id), "delete a document")

    # ------------------------------------------------------------- writes
    def upsert(self, batch: Batch) -> None:
        before, done = {}, []
        try:
            for doc in batch.docs:
                old = self._get_fields(doc.id)
                if old is not None:
                    before[doc.id] = old
                    seq = int(old[A.SEQ_FIELD])
                else:
                    seq, self.next_seq = self.next_seq, self.next_seq + 1
                self._put(doc.id, self._fields(doc, seq))
                done.append(doc.id)
        except BackendError as e:
            try:  # undo the batch: restore what was overwritten, remove what was new
                for i in done:
                    self._put(i, before[i]) if i in before else self._remove(i)
                state = "the rest of the batch was rolled back"
            except BackendError:
                state = "rolling back the rest of the batch failed too: Vespa may hold part of it"
            raise BackendError(f"{e}; {state}") from None

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
        doc = self._doc(old).model_copy(update=values)
        new = self._fields(doc, int(old[A.SEQ_FIELD]))
        names = [k for k in values if k not in self.extra] + [A.PRESENT_FIELD]
        if set(values) & set(self.extra):
            names.append(A.EXTRA_FIELD)
        # a field set to None is removed: assign null clears it in Vespa
        update = {k: {"assign": new.get(k)} for k in names}
        self._http("PUT", doc_path(self.namespace, self.doctype, id), "update a document", body={"fields": update})

    # -------------------------------------------------------------- reads
    def _max_seq(self) -> int:
        hits = self._search({"yql": f"select {A.SEQ_FIELD} from {self.doctype} where true "
                                     f"order by {A.SEQ_FIELD} desc limit 1", "hits": 1}, "read the insertion sequence")
        return int(hits[0]["fields"][A.SEQ_FIELD]) if hits else 0

    def count(self) -> int:
        """totalCount of a match-all query when every node answered (coverage full); otherwise
        the documents are counted by visiting them, rather than reporting a partial count."""
        _, data = self._http("POST", "/search/", "count documents",
                             body={"yql": Y.select(self.doctype, "true"), "hits": 0, "timeout": f"{self.timeout}s"})
        root = data.get("root", {})
        coverage = root.get("coverage", {})
        if not root.get("errors") and coverage.get("full") is True and not coverage.get("degraded"):
            return int(root.get("fields", {}).get("totalCount", 0))
        return sum(1 for _ in self._visit("[id]"))

    def contains(self, id: str) -> bool:
        return self._get_fields(id) is not None

    def get(self, ids: list) -> list:
        out = []
        for i in ids:
            f = self._get_fields(i)
            out.append(self._doc(f) if f is not None else None)
        return out

    def _scan(self, where: str, limit: Optional[int]) -> list:
        """Matching hits in insertion order, paged on hs_seq (no deep offsets)."""
        hits, last = [], None
        while limit is None or len(hits) < limit:
            size = _PAGE if limit is None else min(_PAGE, limit - len(hits))
            cond = where if last is None else f"({where}) and {A.SEQ_FIELD} > {Y.number_literal(last)}"
            page = self._search({"yql": Y.select(self.doctype, cond, order_by_seq=True), "hits": size},
                                "list documents")
            hits += page
            if len(page) < size:
                break
            last = int(page[-1]["fields"][A.SEQ_FIELD])
        return hits

    def iter_ids(self) -> Iterator[str]:
        # visiting returns documents in bucket order: sorted here by the insertion number
        rows = []
        for d in self._visit(f"{self.doctype}:{A.ID_FIELD},{A.SEQ_FIELD}"):
            f = d.get("fields", {})
            if A.ID_FIELD not in f or A.SEQ_FIELD not in f:
                raise BackendError(f"Vespa document {d.get('id')!r} was not written by hybridsearch (it has no "
                                   f"{A.ID_FIELD} / {A.SEQ_FIELD}): the document type is shared with another writer")
            rows.append((int(f[A.SEQ_FIELD]), f[A.ID_FIELD]))
        rows.sort()
        return iter([i for _, i in rows])

    def search_filter(self, node: Node, limit: Optional[int]) -> tuple:
        if limit == 0:
            return [], []
        docs = [self._doc(h["fields"]) for h in self._scan(self.yql.compile(node), limit)]
        return [d.id for d in docs], docs

    # ------------------------------------------------------------ vectors
    def _where(self, node: Optional[Node]) -> Optional[str]:
        return None if node is None or isinstance(node, MatchAll) else self.yql.compile(node)

    def _similarity(self, X: np.ndarray, q: np.ndarray) -> np.ndarray:
        X, q = X.astype(np.float64), q.astype(np.float64)
        if self.metric == "ip":
            return X @ q
        if self.metric == "l2":
            return -np.linalg.norm(X - q, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nan_to_num((X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q)), nan=0.0)

    def _ranked(self, hits: list, q: np.ndarray, limit: int) -> tuple:
        hits = [h for h in hits if self.vec.name in h["fields"]]
        if not hits:
            return [], np.empty(0, dtype=np.float32), []
        X = np.array([self._tensor(h["fields"][self.vec.name]) for h in hits], dtype=np.float32)
        s = self._similarity(X, q)
        order = np.argsort(-s, kind="stable")[:limit]
        docs = [self._doc(hits[i]["fields"]) for i in order]
        return [d.id for d in docs], s[order].astype(np.float32), docs

    def _vector_body(self, q: np.ndarray, k: int, ef: int, where: Optional[str], exact: bool) -> dict:
        nn = Y.nearest_neighbor(self.vec.name, k, ef)
        if exact:
            nn = nn.replace("{targetHits", "{approximate: false, targetHits")
        cond = nn if where is None else f"{nn} and {where}"
        return {"yql": Y.select(self.doctype, cond), "hits": self._hits(k), "ranking": "closeness",
                "input.query(q)": [float(x) for x in q]}

    def search_vectors(self, queries: np.ndarray, limit: int, node: Optional[Node], exact: bool,
                       ef: Optional[int]) -> list:
        if self.vec is None:
            raise UnsupportedError("this schema has no hs.Vector field")
        where = self._where(node)
        ef = max(ef or self.ef, limit)
        return [self._ranked(self._search(self._vector_body(q, limit, ef, where, exact), "run a vector query"),
                             q, limit) for q in queries]

    # --------------------------------------------------------------- text
    def search_text(self, text: str, q, k: int, node: Optional[Node], *, fusion: str = "sum",
                    candidates: int = 100, rrf_k: int = 60, exact: bool = False, ef=None) -> tuple:
        if not self.texts:
            raise UnsupportedError("storage 'vespa' has no text search here: the schema has no hs.Text field")
        where = self._where(node)
        ui = Y.user_input(self.grammar)

        def lexical(n: int) -> list:
            cond = ui if where is None else f"{ui} and {where}"
            return self._search({"yql": Y.select(self.doctype, cond), "hits": self._hits(n), "ranking": "bm25",
                                 "userq": text},
                                "run a text query")

        if q is None:
            hits = lexical(k)
            docs = [self._doc(h["fields"]) for h in hits]
            return [d.id for d in docs], np.array([h["relevance"] for h in hits], dtype=np.float32), docs
        q = q[0]
        pool = max(candidates, k)
        ef = max(ef or self.ef, pool)
        if fusion == "rrf":
            lex = lexical(pool)
            vec = self._search(self._vector_body(q, pool, ef, where, exact), "run a vector query")
            by_id = {h["fields"][A.ID_FIELD]: h for h in lex + vec}
            ids = list(by_id)
            pos = {i: n for n, i in enumerate(ids)}
            slots, scores = fuse_rrf(np.array([pos[h["fields"][A.ID_FIELD]] for h in lex], dtype=np.int64),
                                     np.array([pos[h["fields"][A.ID_FIELD]] for h in vec], dtype=np.int64), k, rrf_k)
            docs = [self._doc(by_id[ids[s]]["fields"]) for s in slots.tolist()]
            return [d.id for d in docs], scores, docs
        # the `hybrid` profile ranks by BM25 + similarity, as API.md's "sum"
        nn = Y.nearest_neighbor(self.vec.name, pool, ef)
        cond = f"({nn} or {ui})" + ("" if where is None else f" and {where}")
        hits = self._search({"yql": Y.select(self.doctype, cond), "hits": self._hits(k), "ranking": "hybrid",
                             "userq": text,
                             "input.query(q)": [float(x) for x in q]}, "run a hybrid query")
        docs = [self._doc(h["fields"]) for h in hits]
        return [d.id for d in docs], np.array([h["relevance"] for h in hits], dtype=np.float32), docs

    def close(self) -> None:
        self.session.close()

