"""The vector lists of the Elasticsearch / OpenSearch storage (storage.py), one vector field at a
time (API.md section 10; fields.py says how each kind is held): candidates from the engine, or
every matching document, ranked here by API.md's exact score from the stored values.

- dense: the engine's pre-filtered knn list (num_candidates / ef_search), or the exact scan of
  the matching documents where it would be no smaller, asked so, or the engine came back short;
- sparse: the engine's best candidates by its reduced-precision dot product, grown until no
  document left out can beat the exact k-th (`_field_top`), or every match;
- multi-vector: every matching document holding the field (no MaxSim index on these engines).

`VectorLists` is a mixin of SearchEngineStorage: it uses its requests (`_search`, `_scan`,
`call`) and dialect (`_knn_body`, `_sparse_query`); the guarded public methods (search_vectors,
vector_top, scores_of, hybrid_lists) stay in storage.py, where RemoteStorage wraps them in the
read section."""
from __future__ import annotations

from typing import Optional

import numpy as np

from hybridsearch.errors import BackendError
from hybridsearch.query.candidates import Candidates
from hybridsearch.storages.fieldscores import field_scores
from hybridsearch.storages.remote.base import PRESENT_FIELD, SEQ_FIELD
from hybridsearch.storages.remote.elasticsearch import answers as A
from hybridsearch.storages.remote.elasticsearch import fields as V
from hybridsearch.storages.remote.elasticsearch import query as Q

MAX_CANDIDATES = 10000  # num_candidates / k ceiling of both engines
PAGE = 5000             # above this many sparse candidates, every match is scanned instead
# a sparse query is one clause per key, and the engines refuse a query whose tree holds more
# leaf clauses than indices.query.bool.max_clause_count (1,024 on OpenSearch; since Lucene 9 the
# filter's clauses count too): a longer query scans the documents. The margin covers what the
# count below may miss of the engine's own rewriting; a refusal all the same scans too.
MAX_CLAUSES = 1024
CLAUSE_MARGIN = 8


def clause_count(query) -> int:
    """An upper estimate of the leaf clauses Lucene counts in a filter query (query.py's shapes):
    a bool's children summed, a range twice (a point range and its doc-values twin), any other
    query once."""
    if not query:
        return 0
    (kind, body), = query.items()
    if kind == "bool":
        return sum(clause_count(c) for key in ("must", "should", "filter", "must_not")
                   for c in body.get(key) or [])
    return 2 if kind == "range" else 1


def too_many_clauses(err: BackendError) -> bool:
    """Whether the engine refused a query for holding more clauses than it takes."""
    return A.TOO_MANY_CLAUSES in str(err)


class VectorLists:
    """The per-field vector lists of SearchEngineStorage (module docstring)."""

    def _field(self, field: Optional[str]) -> str:
        """The vector field a search names (None: the schema's one dense field)."""
        if field is None:
            self.need_vector()
            return self.vec.name
        return field

    def _with_vector(self, flt: Optional[dict], field: str) -> dict:
        """The query of the documents that hold a value of vector field `field` and match `flt`
        (a sparse field: a non-empty value, named in hs_present)."""
        kind = self.kinds[field]
        if kind == "dense":
            holds = [{"exists": {"field": field}}]
        elif kind == "sparse" or self.schema.fields[field].optional:
            holds = [{"term": {PRESENT_FIELD: field}}]
        else:  # a required multi-vector field: every document
            holds = []
        return {"bool": {"filter": holds + ([flt] if flt else [])}}

    def _ranked(self, records: list, field: str, query, k: int) -> tuple:
        """(records, scores float32) of the records holding a value of `field`, best first by
        API.md's exact score for `query` (ties in insertion order), cut to k."""
        kind = self.kinds[field]
        records = sorted((r for r in records if V.holds(kind, V.value_of(r, field, kind))),
                         key=lambda r: int(r[SEQ_FIELD]))
        scores = self._exact_scores(field, records, query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [records[i] for i in order.tolist()], scores[order].astype(np.float32)

    def _exact_scores(self, field: str, records: list, query) -> np.ndarray:
        """API.md's score of each record's value of `field` for `query` (NaN: no value), float64."""
        kind = self.kinds[field]
        return field_scores(kind, self.metrics.get(field, "cosine"),
                            [V.value_of(r, field, kind) for r in records], query)

    def field_scores(self, field: str, records: list, query) -> np.ndarray:
        """RemoteStorage.field_scores: a gone document (None) holds no value."""
        q = query if self.kinds[field] == "dense" else query[0]
        return self._exact_scores(field, [r if r is not None else {} for r in records], q)

    def _answer(self, records: list, field: str, query, limit: int) -> tuple:
        """(ids, scores, docs) of search_vectors from candidate records."""
        ranked, scores = self._ranked(records, field, query, limit)
        docs = [self.codec.document(r) for r in ranked]
        return [d.id for d in docs], scores, docs

    def _multi_answers(self, queries, limit: int, flt: Optional[dict], field: str) -> list:
        """search_vectors of a multi-vector field: one scan of the matching documents for the
        whole batch, reading only the field and the insertion number, then the hits' documents
        whole by id (a batch's hits are far fewer than the documents a scan reads)."""
        records = self._records(self._scan(self._with_vector(flt, field), None, [field, SEQ_FIELD]))
        ranked = [self._ranked(records, field, q, limit) for q in queries]
        full = self._mget(list(dict.fromkeys(r[Q.ID_FIELD] for rs, _ in ranked for r in rs)))
        out = []
        for rs, scores in ranked:
            # a hit deleted by another client since the scan is left out, as a find after it would
            keep = [n for n, r in enumerate(rs) if r[Q.ID_FIELD] in full]
            docs = [self.codec.document(full[rs[n][Q.ID_FIELD]], rs[n][Q.ID_FIELD]) for n in keep]
            out.append(([d.id for d in docs], scores[keep], docs))
        return out

    def _scan_field(self, flt: Optional[dict], field: str) -> list:
        """Every document holding `field` and matching `flt`, as records (insertion order)."""
        return self._records(self._scan(self._with_vector(flt, field), None, True))

    def _count(self, flt: Optional[dict], field: str) -> int:
        return int(self.call("count matches", self.client.count, index=self.index,
                             body={"query": self._with_vector(flt, field)})["count"])

    def _field_top(self, query, k: int, flt: Optional[dict], field: str) -> list:
        """The records among which the top-k of a sparse or multi-vector field is (fields.py):
        a multi-vector field scans every matching document; a sparse field takes the engine's
        best m by its rank-feature dot product, m growing until the exact k-th of them beats any
        document left out (whose engine score is at most the m-th's, and its exact score at most
        that over 1 - SPARSE_SLACK), or every match. A query whose keys and filter make more
        clauses than the engine takes scans the documents holding the field instead."""
        if self.kinds[field] == "multi":
            return self._scan_field(flt, field)
        if len(query[0]) == 0:
            return []  # an empty query shares no key with any document
        if len(query[0]) + clause_count(flt) > MAX_CLAUSES - CLAUSE_MARGIN:
            return self._sparse_scan(query, flt, field)  # one engine clause per key: scanned here
        clause = {"bool": {"must": [self._sparse_query(field, query)], "filter": [flt] if flt else []}}
        try:
            return self._sparse_top(clause, query, k, field)
        except BackendError as e:
            if not too_many_clauses(e):
                raise
            return self._sparse_scan(query, flt, field)

    def _sparse_scan(self, query, flt: Optional[dict], field: str) -> list:
        """The records holding `field`, matching `flt` and sharing a key with sparse `query`."""
        keys = set(query[0].tolist())
        return [r for r in self._scan_field(flt, field) if keys.intersection(map(int, r[field]))]

    def _sparse_top(self, clause: dict, query, k: int, field: str) -> list:
        """_field_top of a sparse field by the engine's query `clause` (its docstring)."""
        m = max(4 * k, 100)
        while m < PAGE:
            hits = self._search({"size": m, "query": clause, "_source": True}, "run a sparse vector query")
            records = self._records(hits)
            if len(hits) < m:
                return records  # every match
            scores = np.sort(self._exact_scores(field, records, query))[::-1]
            if len(scores) >= k and scores[k - 1] > float(hits[-1]["_score"]) / (1 - V.SPARSE_SLACK):
                return records
            m *= 4
        return self._records(self._scan(clause, None, True))

    def _scans_exactly(self, flt: Optional[dict], k: int, exact: bool, ef: Optional[int], field: str) -> bool:
        """Whether a dense list is the exact scan: asked so, or an unfiltered collection no larger
        than the candidate list (like a filtered Lucene query whose matches fit in num_candidates:
        a graph walk over so few points, or over many duplicates, can miss part of the true top-k)."""
        if not exact and flt is None:
            if field not in self._size:
                self._size[field] = self._count(None, field)
            exact = self._size[field] <= min(max(ef or self.ef, k), MAX_CANDIDATES)
        return exact

    def _knn_args(self, k: int, ef: Optional[int]) -> tuple:
        n = min(k, MAX_CANDIDATES)
        return n, min(max(ef or self.ef, n), MAX_CANDIDATES)

    def _field_list(self, records: list, field: str, query, k: int) -> Candidates:
        """Candidates of the records holding `field`, best first by API.md's exact score (ties in
        insertion order), cut to k; every record is kept for this find's scores_of."""
        self.cache().keep({r[Q.ID_FIELD]: r for r in records}, True)
        ranked, scores = self._ranked(records, field, query, k)
        return self.candidates(ranked, scores, True, vectors=True)

    def _vector_candidates(self, q: np.ndarray, k: int, flt: Optional[dict], hits: Optional[list],
                           field: str) -> Candidates:
        """The knn `hits` ranked by exact score, or the exact scan (hits None, or the engine came
        back short of the matches)."""
        if hits is not None and len(hits) < k and len(hits) < self._count(flt, field):
            hits = None
        records = self._scan_field(flt, field) if hits is None else self._records(hits)
        return self._field_list(records, field, q, k)

    def _knn_search(self, q: np.ndarray, k: int, ef: int, flt: Optional[dict], field: str) -> list:
        """Engine hits (dicts with _id, _score, _source) of a pre-filtered vector query."""
        return self._search(self._knn_body(q, k, ef, flt, field), "run a vector query")
