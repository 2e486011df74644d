"""What the remote storages share; each engine (elasticsearch/, vespa/) keeps only its dialect.

- `RemoteConfig`: the options every remote storage takes (request timeout, retries, TLS).
- `Secrets`: the credentials of a collection, redacted from every message; they are never part
  of a repr, of `stats()` or of an error.
- `RemoteStorage.call`: one request through the engine's client; an answer 429 or 503 is resent
  after an exponential backoff (`retry_backoff` seconds, doubled each time up to 8 s,
  `max_retries` times), and any failure becomes `hs.BackendError` "<engine> at <address> failed to <what>
  (status N | no response): <reason>".
- slow requests: a call that takes longer than `slow_call` seconds (default 1) is logged under
  the `hybridsearch` logger at WARNING, with what it did and how long it took; resends after a
  429 / 503 are logged at INFO. A collection that must stay quiet sets `slow_call=None`.
- `FieldCodec`: a document <-> the fields stored on the engine: the schema's indexed fields under
  their names, `hs_id` (the id, filterable), `hs_seq` (insertion number), `hs_present` (the
  optional fields holding a value, for `$exists`) and `hs_extra` (the unindexed fields, one JSON
  string). The names are part of the on-engine format: indexes written before open after.
- `RemoteStorage.sequence` / `rollback`: insertion numbers of a batch (an upsert keeps its
  document's place) and the undo of a batch that failed half-way (what was overwritten is put
  back, what was new is deleted): the engines have no multi-document transaction.
- `RemoteStorage.rescored`: engines report transformed similarities; hits are ranked again by
  API.md's score computed from their stored vectors (`storages.base.rank_exactly`).
- the retrieval primitives (storages/base.py) keyed by id: one find runs inside `reading()`, which
  holds the read section and keeps what the find's lists brought (`ReadCache`: the records with
  their vectors, each lexical list's BM25), so that `scores_of` asks the engine only for what no
  list held: the stored vectors of ids (`records_of`) and the BM25 of given ids (`bm25_of`), and
  none of that when the lexical list held every match. query/executor.py unions, fuses, breaks
  ties and pages for every engine.
- one writer per storage object (storages/locking.py): the write calls (`WRITES`) of every remote storage hold its
  lock alone and the read calls (`READS`) share it, so that a write deciding from the engine's
  data what it changes (an update_many or a delete by filter reads the matches, then writes
  them) sees every write of this object that returned before it and no other interleaves, and
  a read never sees a write of several requests half done: within one DocumentArray, calls are
  serializable. The engines have no transaction spanning a read and a write, so calls of other
  processes or objects on the same collection can still interleave.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import urllib.parse
import uuid
from typing import Any, Callable, Optional

import numpy as np

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import BackendError, UnsupportedError
from hybridsearch.query.candidates import Candidates
from hybridsearch.storages.base import Storage, rank_exactly
from hybridsearch.storages.locking import Section, held
from hybridsearch.storages.open_mode import settle
from hybridsearch.storages.config import GraphConfig, boolean, integer, number, option, path_or_none, StrPath

ID_FIELD = "hs_id"            # the id as a keyword (engines allow no range query on their own ids)
SEQ_FIELD = "hs_seq"          # insertion number: filter-only results come in this order
PRESENT_FIELD = "hs_present"  # names of the optional fields that hold a value ($exists)
EXTRA_FIELD = "hs_extra"      # the fields that are not indexed, as one JSON string
log = logging.getLogger("hybridsearch")
RETRY_STATUS = (429, 503)     # answers that mean "busy, ask again later"
_EXISTS = object()  # create_or_find: the engine said it exists already
MAX_BACKOFF = 8.0             # seconds: the longest wait between two resends
ROLLED_BACK = "the rest of the batch was rolled back"


@dataclasses.dataclass(frozen=True)
class RemoteConfig(GraphConfig):
    """Options every remote storage takes, beside its engine's own."""

    timeout: float = option(30.0, number(0), "seconds per request")
    # 6 resends from 0.5 s wait 23.5 s in all: the time a loaded cluster takes to elect a
    # manager and promote replicas after losing a node (its shards answer 503 meanwhile)
    max_retries: int = option(6, integer(0), "resends of a request refused with 429 / 503")
    retry_backoff: float = option(0.5, number(0), "seconds before the first resend, doubled after each (at most 8 s)")
    ca_certs: Optional[StrPath] = option(None, path_or_none, "CA bundle that signed the server's certificate (https)")
    verify_certs: bool = option(True, boolean, "verify the server's certificate (off only for a test node)")
    slow_call: Optional[float] = option(1.0, number(0, allow_none=True), "log requests slower than this many seconds (None: never)")


# ------------------------------------------------------------------ credentials
def uuid_of(namespace: uuid.UUID, id: str) -> uuid.UUID:
    """uuid5 of a document id in `namespace`, for engines whose object ids must be uuids. An id
    with a lone surrogate has no UTF-8 form, so no document can have it (writes refuse it); a
    delete or a lookup of one still needs an answer (nothing there), so it maps, through its
    surrogate-escaped bytes, into a namespace of its own where no stored id can land."""
    try:
        return uuid.uuid5(namespace, id)
    except UnicodeEncodeError:
        return uuid.uuid5(_UNSTORABLE_IDS, id.encode("utf-8", "surrogatepass").hex())


_UNSTORABLE_IDS = uuid.uuid5(uuid.NAMESPACE_URL, "hybridsearch/ids-without-utf-8")


def split_userinfo(url: str) -> tuple:
    """(the URL without `user:password@`, (user, password) decoded or None)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else (parts.hostname or "")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))
    return bare, (urllib.parse.unquote(parts.username or ""), urllib.parse.unquote(parts.password or ""))


def userinfo_secrets(url) -> list:
    """What of a URL's `user:password@` must never be shown: the userinfo and the password, as
    written and decoded."""
    if not isinstance(url, str) or "@" not in url.split("//", 1)[-1]:
        return []
    userinfo = url.split("//", 1)[-1].split("@", 1)[0]
    password = userinfo.split(":", 1)[1:]
    return [userinfo] + password + [urllib.parse.unquote(p) for p in password]


def http_url(v):
    """An option check: v if it is an http(s) URL, else ValueError."""
    if not isinstance(v, str) or not v.startswith(("http://", "https://")):
        raise ValueError("an http(s) URL")
    return v


def public_url(url):
    """A URL as messages and stats show it: without credentials (anything else as it is)."""
    return split_userinfo(url)[0] if isinstance(url, str) else url


class Secrets:
    """Strings that must never leave the process in a message (passwords, keys, tokens)."""

    def __init__(self, strings) -> None:
        # longest first, so a secret that contains another is replaced whole
        self._strings = sorted({str(s) for s in strings if s}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for s in self._strings:
            text = text.replace(s, "***")
        return text

    def __repr__(self) -> str:
        return f"Secrets({len(self._strings)} redacted)"


# ---------------------------------------------------------------- documents
def as_floats(v) -> list:
    return [float(x) for x in v]


class FieldCodec:
    """A document <-> the fields one engine document holds (module docstring). `encode_vector`
    and `decode_vector` are the engine's vector format (a list, Vespa's tensor JSON...)."""

    def __init__(self, schema: Schema, encode_vector: Callable = as_floats,
                 decode_vector: Callable = lambda v: v) -> None:
        self.schema = schema
        self.encode_vector, self.decode_vector = encode_vector, decode_vector
        self.vec = schema.vector
        self.indexed = [s for s in schema.fields.values() if s.kind not in (Kind.ID, Kind.OTHER)]
        self.optional = [s.name for s in schema.fields.values() if s.optional]
        self.extra = [s.name for s in schema.fields.values() if s.kind is Kind.OTHER]

    def fields(self, doc, seq: int) -> dict:
        """The engine fields of a document with insertion number `seq` (absent values left out)."""
        out = {ID_FIELD: doc.id, SEQ_FIELD: seq,
               PRESENT_FIELD: [n for n in self.optional if getattr(doc, n) is not None]}
        for spec in self.indexed:
            v = getattr(doc, spec.name)
            if v is not None:
                out[spec.name] = self.encode_vector(v) if spec.kind is Kind.VECTOR else v
        if self.extra:
            out[EXTRA_FIELD] = doc.model_dump_json(include=set(self.extra))
        return out

    def document(self, fields: dict, id: Optional[str] = None):
        """The document stored as `fields` (its id from `hs_id` unless given)."""
        data = {"id": fields[ID_FIELD] if id is None else id}
        for spec in self.indexed:
            if spec.name in fields:
                v = fields[spec.name]
                data[spec.name] = self.decode_vector(v) if spec.kind is Kind.VECTOR else v
        if self.extra and EXTRA_FIELD in fields:
            data.update(json.loads(fields[EXTRA_FIELD]))
        return self.schema.model.model_validate(data)

    def vector(self, fields: dict):
        return self.decode_vector(fields[self.vec.name])

    def update(self, old: dict, values: dict) -> dict:
        """The fields a partial update writes: the changed indexed fields (None where a value is
        removed), `hs_present`, and `hs_extra` when an unindexed field changed."""
        new = self.fields(self.document(old).model_copy(update=values), int(old[SEQ_FIELD]))
        names = [k for k in values if k not in self.extra] + [PRESENT_FIELD]
        if set(values) & set(self.extra):
            names.append(EXTRA_FIELD)
        return {k: new.get(k) for k in names}


def _hashable(x):
    """x as a dict key: itself, or its identity when it cannot be hashed (a query object holding
    a list); either names the same query for the length of one find."""
    try:
        hash(x)
        return x
    except TypeError:
        return ("id", id(x))


class ReadCache:
    """What the lists of one find brought (RemoteStorage.reading), so that scoring the union asks
    the engine only for what no list held.

    - records: id -> the engine fields of a document a list returned (its vector among them,
      where the engine returned it; `vectors` says whether they did);
    - lexical: (text, filter) -> (id -> BM25, whether the list held every match): a lexical list
      shorter than asked holds every match under its filter, so a pre-filtered candidate missing
      from it holds no query term (BM25 0).
    """

    def __init__(self) -> None:
        self.records: dict = {}
        self.with_vectors: set = set()
        self.lexical: dict = {}

    def keep(self, records: dict, vectors: bool) -> None:
        for i, r in records.items():
            if i not in self.records or (vectors and i not in self.with_vectors):
                self.records[i] = r
            if vectors:
                self.with_vectors.add(i)

    def keep_lexical(self, text, node, scores: dict, complete: bool) -> None:
        key = (_hashable(text), _hashable(node))
        known, was_complete = self.lexical.get(key, ({}, False))
        self.lexical[key] = ({**known, **scores}, was_complete or complete)

    def bm25(self, text, node) -> tuple:
        """(id -> BM25 the lists gave, whether that is every match) of `text` under `node`."""
        return self.lexical.get((_hashable(text), _hashable(node)), ({}, False))


# ------------------------------------------------------------------ storage
# the Storage calls that change the collection, one at a time per storage object, and the calls
# that read it, which share it while no write runs
WRITES = ("upsert", "delete", "update_fields", "delete_where", "update_where", "close")
READS = ("count", "contains", "get", "iter_ids", "search_vectors", "search_filter", "count_matches", "facets",
         "search_sorted", "column_values", "stats", "vector_top", "text_top", "text_matches", "scores_of",
         "hybrid_lists")


class RemoteStorage(Storage):
    """A collection on a search engine reached over the network. Subclasses give `engine`
    (its name in messages), `failure` (their client's errors) and `address` (where it lives).
    Their calls run under one lock (module docstring), writes alone: each method named in
    `WRITES` or `READS` is wrapped when the subclass is defined, so that no storage can forget it."""

    engine = ""
    Config = RemoteConfig

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        _guard(cls, cls.__dict__)

    def __init__(self, schema: Schema, config: RemoteConfig, secrets: list, codec: FieldCodec) -> None:
        super().__init__(schema, config)
        self.secrets = Secrets(secrets)
        self.codec = codec
        self.ef = config.ef
        self.timeout = float(config.timeout)
        self.max_retries, self.retry_backoff = config.max_retries, float(config.retry_backoff)
        self.slow_call = None if config.slow_call is None else float(config.slow_call)
        self.vec = schema.vector
        self.texts = [s.name for s in schema.texts]
        self.next_seq = 1  # the insertion number of the next new document (read from the engine on open)
        self.calls = Section()
        self._finding = threading.local()  # .cache: the ReadCache of this thread's find, if one runs

    # ------------------------------------------------------------ dialect
    def address(self) -> dict:
        """Where the collection lives, the node(s) first (shown by messages, repr and stats
        through `shown`, which removes credentials)."""
        raise NotImplementedError

    def failure(self, e: BaseException):
        """(status or None, reason) when `e` is a failure of this engine's client, else None."""
        raise NotImplementedError

    # ------------------------------------------------------------ requests
    def redact(self, text: str) -> str:
        return self.secrets.redact(text)

    def shown(self, value=None):
        """A value as messages, repr and stats show it: URLs without `user:password@`, every
        secret redacted (lists and dicts item by item). Without a value: the address."""
        if value is None:
            return {k: self.shown(v) for k, v in self.address().items()}
        if isinstance(value, str):
            return self.redact(public_url(value))
        if isinstance(value, (list, tuple)):
            return [self.shown(v) for v in value]
        if isinstance(value, dict):
            return {k: self.shown(v) for k, v in value.items()}
        return value

    def error(self, what: str, status, reason) -> BackendError:
        """BackendError "<engine> at <node> failed to <what> (status N | no response): <reason>";
        its `status` attribute keeps the status (None: no answer came)."""
        code = f"status {status}" if status is not None else "no response"
        err = BackendError(self.redact(f"{self.engine} at {self.where()} failed to {what} ({code}): {reason}"))
        err.status = status
        return err

    def refused(self, what: str, reason) -> BackendError:
        """BackendError for an answer that came back successful but reports that the engine did
        not do all it was asked (failures inside a by-query answer, conflicts left over)."""
        return BackendError(self.redact(f"{self.engine} at {self.where()} failed to {what}: {reason}"))

    def where(self) -> str:
        """The address's first entry, the node(s), without credentials."""
        return next(iter(self.shown().values()))

    def settle_mode(self, exists, what: str) -> None:
        """The mode= of the DocumentArray opening this storage against whether its index /
        collection (`what`) exists (storages/open_mode.settle); called before anything is created."""
        settle(bool(exists), f"{self.engine} {what}")

    def call(self, what: str, fn, *args, **kwargs):
        """fn(*args, **kwargs), resent with exponential backoff while the engine answers 429 / 503;
        a failure of the client -> BackendError (anything else propagates). A call slower than
        `slow_call` seconds, resends included, is logged at WARNING."""
        start = time.perf_counter()
        try:
            return self._attempts(what, fn, args, kwargs)
        finally:
            took = time.perf_counter() - start
            if self.slow_call is not None and took > self.slow_call:
                log.warning("%s at %s: %s took %.2f s (slow_call=%g s)", self.engine, self.where(), what,
                            took, self.slow_call)

    def create_or_find(self, what: str, create: Callable[[], Any], exists: str) -> Any:
        """create()'s answer, resent as `call` resends, or None when the engine answers that the
        index / collection already exists (its reason holds `exists`): a loaded cluster can create
        it and still answer a timeout or 503, so the resend finds it, and another process may
        have created it since the caller looked. The caller then opens it as an existing one,
        which checks that it holds this schema."""
        def attempt():
            try:
                return create()
            except Exception as e:  # the client's errors: only "already exists" is an answer here
                info = self.failure(e)
                if info is not None and exists in str(info[1]):
                    return _EXISTS
                raise

        answer = self.call(what, attempt)
        return None if answer is _EXISTS else answer

    def _attempts(self, what: str, fn, args: tuple, kwargs: dict):
        for attempt in range(self.max_retries + 1):
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # the client's errors are translated, anything else propagates
                info = self.failure(e)
                if info is None:
                    raise
                status, reason = info
                if status in RETRY_STATUS and attempt < self.max_retries:
                    wait = min(self.retry_backoff * (2 ** attempt), max(self.retry_backoff, MAX_BACKOFF))
                    log.info("%s at %s answered %s to %s; resending in %.2f s", self.engine, self.where(),
                             status, what, wait)
                    time.sleep(wait)
                    continue
                raise self.error(what, status, reason) from None

    # ------------------------------------------------------------- batches
    def sequence(self, ids: list, before: dict) -> list:
        """The insertion number of each id: kept where the document exists (`before`: id -> its
        stored fields), the next ones for new documents."""
        out = []
        for i in ids:
            if i in before:
                out.append(int(before[i][SEQ_FIELD]))
            else:
                out.append(self.next_seq)
                self.next_seq += 1
        return out

    def rollback(self, restore: Callable[[list], bool], touched: list, before: dict,
                 seq0: Optional[int] = None) -> str:
        """Undoes a failed batch: restore([(id, its old fields, or None: delete it), ...]) puts
        back every id the batch changed (or may have changed) and says whether all went back.
        -> the sentence for the error. A full undo also gives back the insertion numbers the
        batch took (`seq0`: the counter before it)."""
        try:
            ok = restore([(i, before.get(i)) for i in touched])
        except BackendError:
            ok = False
        if not ok:
            return f"rolling the batch back failed too: {self.engine} may hold part of it"
        if seq0 is not None:
            self.next_seq = seq0
        return ROLLED_BACK

    # --------------------------------------------------------------- reads
    def need_vector(self) -> None:
        if self.vec is None:
            raise UnsupportedError("this schema has no hs.Vector field")

    def need_texts(self) -> None:
        if not self.texts:
            raise UnsupportedError(f"storage {self.name!r} has no text search here: the schema has no hs.Text field")

    def vectors(self, records: list) -> np.ndarray:
        """The stored vectors of `records` (engine fields) as float32 rows, zeros where one has none."""
        zero = [0.0] * self.vec.dim
        return np.array([self.codec.vector(r) if self.vec.name in r else zero for r in records], dtype=np.float32)

    def rescored(self, records: list, q: np.ndarray, limit: int) -> tuple:
        """(ids, scores float32, docs) of the records (engine fields) that hold a vector, best
        first by API.md's exact score for q, cut to `limit`."""
        return self.rescored_each(records, q[None, :], limit)[0]

    def rescored_each(self, records: list, queries: np.ndarray, limit: int) -> list:
        """`rescored` for each row of `queries`, the records' vectors read once."""
        records = [r for r in records if self.vec.name in r]
        if not records:
            return [([], np.empty(0, dtype=np.float32), []) for _ in queries]
        X = self.vectors(records)
        out = []
        for q in queries:
            order, scores = rank_exactly(X, q, self.metric, limit)
            docs = [self.codec.document(records[i]) for i in order]
            out.append(([d.id for d in docs], scores, docs))
        return out

    # --------------------------------------------------- retrieval primitives
    # keys are document ids (an object array); a list's documents come with it where the engine
    # returned them (Candidates.docs), and their records stay in the find's ReadCache
    def reading(self):
        """The read section for one find, and the ReadCache of what its lists bring."""
        return _Reading(self)

    def cache(self) -> ReadCache:
        """This thread's find's ReadCache (a throwaway one outside a find: nothing is kept)."""
        cache = getattr(self._finding, "cache", None)
        return cache if cache is not None else ReadCache()

    def candidates(self, records: list, scores, docs: bool = True, vectors: bool = False) -> Candidates:
        """Candidates of engine records (each holding hs_id and hs_seq), aligned with `scores`;
        the records are kept for this find (`vectors`: they hold their vector when they have one),
        and with `docs` their documents are built for the hits."""
        ids = [r[ID_FIELD] for r in records]
        self.cache().keep(dict(zip(ids, records)), vectors)
        keys = np.empty(len(ids), dtype=object)
        keys[:] = ids
        return Candidates(keys, np.asarray(scores, dtype=np.float32),
                          np.array([int(r[SEQ_FIELD]) for r in records], dtype=np.int64),
                          [self.codec.document(r) for r in records] if docs else None)

    def lexical_list(self, text, node, records: list, scores, asked: Optional[int], docs: bool = True,
                     vectors: bool = False) -> Candidates:
        """`candidates` of a lexical list asked for `asked` hits (None: every match), its BM25 kept
        for this find's `scores_of` (as float32, the list's own scores)."""
        scores = np.asarray(scores, dtype=np.float32)
        self.cache().keep_lexical(text, node, dict(zip([r[ID_FIELD] for r in records], scores.tolist())),
                                  asked is None or len(records) < asked)
        return self.candidates(records, scores, docs, vectors)

    def vector_list(self, records: list, q: np.ndarray, k: int, docs: bool = True) -> Candidates:
        """The records holding a vector, best first by API.md's exact score for q (ties in
        insertion order), cut to k, as Candidates."""
        records = sorted((r for r in records if self.vec.name in r), key=lambda r: int(r[SEQ_FIELD]))
        if not records:
            return Candidates(np.empty(0, dtype=object), np.empty(0, dtype=np.float32), np.empty(0, dtype=np.int64),
                              [] if docs else None)
        order, scores = rank_exactly(self.vectors(records), q, self.metric, k)
        self.cache().keep({r[ID_FIELD]: r for r in records}, True)
        return self.candidates([records[i] for i in order.tolist()], scores, docs, vectors=True)

    def records_of(self, ids: list) -> dict:
        """id -> engine fields, with the vector, of the ids that exist (one or few requests)."""
        raise NotImplementedError

    def _field(self, field: Optional[str]) -> str:
        """The dense / sparse / multi-vector field a call names (None: the schema's one)."""
        raise NotImplementedError

    def field_scores(self, field: str, records: list, query) -> np.ndarray:
        """Exact scores (API.md's conventions) of `query` against field `field` of each record
        (engine fields; None: the document is gone), NaN where a record holds no value."""
        raise NotImplementedError

    def bm25_of(self, text, ids: list) -> dict:
        """id -> best-field BM25 of `text` of those of `ids` that the text query matches (the
        lexical query restricted to the ids: its scores are those of the unrestricted one)."""
        raise UnsupportedError(f"storage {self.name!r} does not score given documents by text")

    def scores_of(self, keys: np.ndarray, part: str, query, field: Optional[str] = None) -> np.ndarray:
        """A part's scores of the given documents: a vector part from field `field`'s stored
        values the find's lists brought (the others read by id), NaN where a document holds no
        value of the field (the executor fuses that as 0)."""
        ids = keys.tolist()
        cache = self.cache()
        if part == "vector":
            missing = [i for i in ids if i not in cache.with_vectors]
            if missing:
                cache.keep(self.records_of(missing), True)
            return self.field_scores(self._field(field), [cache.records.get(i) for i in ids], query).astype(np.float32)
        self.need_texts()
        known, complete = self._bm25_known(query)
        missing = [] if complete else [i for i in ids if i not in known]
        if missing:
            known = {**known, **self.bm25_of(query, missing)}
        return np.array([known.get(i, 0.0) for i in ids], dtype=np.float32)

    def _bm25_known(self, text) -> tuple:
        """(id -> BM25, every match listed) from this find's lexical lists of `text`: under any
        filter (the keys come from lists pre-filtered alike), complete only when one was."""
        known, complete = {}, False
        key = _hashable(text)
        for (t, _), (scores, whole) in self.cache().lexical.items():
            if t == key:
                known.update(scores)
                complete = complete or whole
        return known, complete

    def stats(self) -> dict:
        return {**super().stats(), **self.shown()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.shown().items())})"


class _Reading:
    """RemoteStorage.reading's context: the read section held, a fresh ReadCache for this thread
    (a find inside a find, as a fallback calling the primitives, shares the outer one)."""

    def __init__(self, storage: RemoteStorage) -> None:
        self.storage = storage
        self.guard = self.outer = None

    def __enter__(self):
        s = self.storage
        self.guard = s.calls.enter(False)
        try:
            usable = getattr(s, "usable", None)
            if usable is not None:  # a closed collection answers nothing
                usable()
        except BaseException:
            s.calls.leave(self.guard)
            raise
        self.outer = getattr(s._finding, "cache", None)
        if self.outer is None:
            s._finding.cache = ReadCache()
        return self

    def __exit__(self, *exc) -> None:
        s = self.storage
        if self.outer is None:
            s._finding.cache = None
        s.calls.leave(self.guard)


def _guard(cls, methods) -> None:
    """Wraps the calls of `methods` (name -> function) that `WRITES` and `READS` name, on `cls`."""
    for names, write in ((WRITES, True), (READS, False)):
        for name in names:
            fn = methods.get(name)
            if fn is not None and not getattr(fn, "__isabstractmethod__", False) \
                    and not getattr(fn, "sections_inside", False):
                setattr(cls, name, held(fn, write))


# RemoteStorage's own calls and Storage's fallbacks, for the storages that inherit them
_guard(RemoteStorage, {name: getattr(RemoteStorage, name) for name in WRITES + READS})
