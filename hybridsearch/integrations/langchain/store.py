"""HybridSearchVectorStore: LangChain's VectorStore over a hybridsearch DocumentArray."""
from __future__ import annotations

import math
import uuid
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

import hybridsearch as hs
from hybridsearch.errors import ConfigError, EmbeddingError, UnsupportedError
from hybridsearch.integrations import collection as col
from hybridsearch.integrations.langchain import metadata_filter
from hybridsearch.integrations.langchain.schema import EMBEDDING, LAYOUT, RESERVED, make_schema, row

MODES = ("vector", "lexical", "hybrid")
# find() arguments the store sets itself, and what a LangChain caller gives instead
_OWN_ARGUMENTS = {"limit": "k= (the number of documents)",
                  "text": "the query (the first argument; mode= picks vector, lexical or hybrid search)",
                  "vector": "the query, or the embedding of similarity_search_by_vector"}
_PROBE = "hybridsearch dimension probe"  # embedded once to learn the dimension when not given


class HybridSearchVectorStore(VectorStore):
    """A LangChain `VectorStore` keeping its documents in a hybridsearch collection on any
    storage (`hs.backends()`): vector, lexical (BM25) and hybrid search, metadata filters pushed
    down to the storage for the keys declared in `metadata_fields`.

    Args:
        embedding: the LangChain `Embeddings` that embeds texts and queries.
        storage: a storage name, as `hs.DocumentArray` takes it ("memory", "hnsw", "sqlite", ...).
        path: where a persistent storage keeps its files; reopening the path gives the
            documents back.
        metadata_fields: metadata keys stored as typed, filterable columns: {"year": int,
            "genre": str, "price": float, "used": bool}. Filters on other keys are still exact,
            evaluated in Python over the stored metadata (declare keys you filter on for speed).
        dimension: the embedding dimension; when None the embedding model is asked once
            (one `embed_query` call) at construction.
        collection: an already-open `hs.DocumentArray` to use instead of opening one (its
            schema: `text: hs.Text`, `embedding: hs.Vector[d]`, `metadata: dict = {}` and
            optional str / int / float / bool columns); the store then leaves closing it to you.
        **options: passed to `hs.DocumentArray` (metric="cosine" | "ip" | "l2", m=, ef=, hosts=,
            index=, ...).

    Search: `similarity_search(query, k, mode="hybrid")` (or `"lexical"`, default `"vector"`);
    every other keyword of `hs.DocumentArray.find` passes through (fusion="rrf", weights=,
    candidates=, exact=, ef=, text_fields=, ...). `filter=` is hybridsearch's filter language
    over metadata keys ({"genre": "jazz", "year": {"$gte": 1990}}, $and / $or / $not), plus
    $between, $like, $ilike and $contains, which are evaluated in Python.
    """

    def __init__(self, embedding: Optional[Embeddings] = None, storage: str = "memory", *, path: Any = None,
                 metadata_fields: Optional[dict] = None, dimension: Optional[int] = None,
                 collection: Optional[hs.DocumentArray] = None, **options: Any) -> None:
        self._embedding = embedding
        if collection is not None:
            if path is not None or options or storage != "memory":
                raise ConfigError("pass either collection= (an open DocumentArray) or storage= / path= / options, "
                                  "not both")
            if dimension is not None:
                col.check_dimension(dimension, "dimension")
            self._dimension, self._fields = col.adopt(collection, LAYOUT, "LangChain", metadata_fields, dimension)
            self._da, self._owned = collection, False
        else:
            self._fields = col.declare(metadata_fields, RESERVED)
            if dimension is None:
                if embedding is None:
                    raise ConfigError("give embedding= (a LangChain Embeddings) or dimension=")
                dimension = len(self._embed([_PROBE], query=True)[0])
            self._dimension = col.check_dimension(dimension, "dimension")
            self._da = col.open_array(make_schema(self._dimension, self._fields), storage, options, path)
            self._owned = True
        metric = self._da.stats().get("metric", "cosine")
        self._metric = metric.get(EMBEDDING, "cosine") if isinstance(metric, dict) else metric

    # --- housekeeping -------------------------------------------------------------------------
    @property
    def embeddings(self) -> Optional[Embeddings]:
        """The embedding model of texts and queries."""
        return self._embedding

    @property
    def collection(self) -> hs.DocumentArray:
        """The hybridsearch DocumentArray holding the documents."""
        return self._da

    def close(self) -> None:
        """Closes the collection when the store opened it (a collection= given stays open)."""
        if self._owned:
            self._da.close()

    def __enter__(self) -> "HybridSearchVectorStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- writes -------------------------------------------------------------------------------
    def add_texts(self, texts: Iterable[str], metadatas: Optional[list] = None, *, ids: Optional[list] = None,
                  **kwargs: Any) -> list:
        """Embeds the texts and upserts them (an existing id is overwritten); returns the ids.
        Atomic: an embedding error or a bad value raises a typed error and writes nothing."""
        batch_size = kwargs.pop("batch_size", None)
        if kwargs:
            raise ConfigError(f"add_texts got unknown arguments {sorted(kwargs)}; it takes metadatas=, ids=, "
                              "batch_size=")
        texts = list(texts)
        metadatas = [{} for _ in texts] if metadatas is None else list(metadatas)
        ids = [None] * len(texts) if ids is None else list(ids)
        if len(metadatas) != len(texts) or len(ids) != len(texts):
            raise ConfigError(f"got {len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids; "
                              "give one of each per text")
        ids = [uuid.uuid4().hex if i is None else i for i in ids]
        for metadata in metadatas:  # cheap checks before the (costly) model call
            col.column_values(self._fields, metadata)
        vectors = self._embed(texts, batch_size=batch_size) if texts else []
        rows = [row(self._da.schema, self._fields, i, t, v, m)
                for i, t, v, m in zip(ids, texts, vectors, metadatas)]
        if rows:
            self._da.extend(rows)
        return ids

    def add_documents(self, documents: list, **kwargs: Any) -> list:
        """Upserts LangChain Documents: the ids are `ids=` if given, else each document's id
        (a new one where it has none). The documents themselves are not changed."""
        ids = kwargs.pop("ids", None)
        if ids is None:
            ids = [doc.id for doc in documents]
        return self.add_texts([doc.page_content for doc in documents], [doc.metadata for doc in documents],
                              ids=ids, **kwargs)

    def delete(self, ids: Optional[list] = None, *, filter: Optional[dict] = None, **kwargs: Any) -> bool:
        """Deletes these ids (absent ones are ignored; a str is one id), or the documents
        matching `filter`, or with neither every document. Returns True."""
        if kwargs:
            raise ConfigError(f"delete got unknown arguments {sorted(kwargs)}; it takes ids= or filter=")
        if ids is not None and filter is not None:
            raise ConfigError("delete takes ids= or filter=, not both")
        if filter is not None:
            where = self._where(filter)
            if where is not col.NOTHING:
                self._da.delete(filter=where)
            return True
        ids = self._da.to_columns(fields=["id"])["id"] if ids is None else col.id_list(ids, "delete")
        if len(ids):
            self._da.delete(list(ids))
        return True

    # --- reads --------------------------------------------------------------------------------
    def get_by_ids(self, ids: Sequence[str], /) -> list:
        """The documents of these ids that exist, in the order asked (each once); a str is one id."""
        wanted = list(dict.fromkeys(col.id_list(ids, "get_by_ids")))
        if not wanted:
            return []
        found = {d.id: d for d in self._da.find(filter={"id": {"$in": wanted}}, limit=None).docs}
        return [_document(found[i]) for i in wanted if i in found]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list:
        """The k documents closest to the query (mode="vector"), or best by BM25
        (mode="lexical"), or by both (mode="hybrid"); see the class docstring for filter=."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, *, mode: str = "vector",
                                     filter: Optional[dict] = None, query_syntax: bool = False,
                                     **kwargs: Any) -> list:
        """[(Document, score)], higher is better: the vector similarity of the storage's metric
        (cosine similarity by default), BM25 (lexical) or the fused score (hybrid). The query is
        plain words; `query_syntax=True` reads it as hybridsearch's query syntax ("phrases",
        +required, -excluded, prefix*)."""
        mode = _mode(mode)
        text = col.query_text(query, query_syntax) if mode != "vector" else None
        vector = self._embed([query], query=True)[0] if mode != "lexical" else None
        return self._search(vector, text, k, filter, kwargs)

    def similarity_search_by_vector(self, embedding: list, k: int = 4, *, filter: Optional[dict] = None,
                                    **kwargs: Any) -> list:
        """The k documents closest to this embedding."""
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, filter=filter, **kwargs)]

    def similarity_search_with_score_by_vector(self, embedding: list, k: int = 4, *, filter: Optional[dict] = None,
                                               **kwargs: Any) -> list:
        """[(Document, vector score)] of the k documents closest to this embedding."""
        _vector_only(kwargs)
        return self._search(self._check_vectors([embedding])[0], None, k, filter, kwargs)

    def _similarity_search_with_relevance_scores(self, query: str, k: int = 4, **kwargs: Any) -> list:
        # relevance in [0, 1] is a function of a vector score or of a linear fusion (its weighted
        # mean); BM25 and sum / rrf fusion have none
        mode = _mode(kwargs.get("mode", "vector"))
        if mode == "lexical" or (mode == "hybrid" and kwargs.get("fusion", "sum") != "linear"):
            raise UnsupportedError(f"relevance scores in [0, 1] exist for mode='vector' and for mode='hybrid' with "
                                   f"fusion='linear'; mode={mode!r} scores are unbounded: use "
                                   "similarity_search_with_score")
        scored = self.similarity_search_with_score(query, k, **kwargs)
        if mode == "hybrid":  # linear fusion: a weighted sum of [0, 1] parts; over the weights' sum, their mean
            weights = kwargs.get("weights")
            total = sum(float(w) for w in weights.values()) if isinstance(weights, dict) else 1.0
            return [(doc, min(1.0, max(0.0, score / total))) if total > 0 else (doc, score) for doc, score in scored]
        relevance = self._select_relevance_score_fn()
        return [(doc, relevance(score)) for doc, score in scored]

    async def _asimilarity_search_with_relevance_scores(self, query: str, k: int = 4, **kwargs: Any) -> list:
        # the sync rules (which modes have relevance scores) in a thread, as LangChain's defaults run
        return await run_in_executor(None, self._similarity_search_with_relevance_scores, query, k, **kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Our vector scores (higher is better) -> LangChain relevance in [0, 1]: cosine and ip
        (1 + s) / 2, l2 (score = -distance) 1 - distance / sqrt(2), as LangChain's own stores,
        clipped to [0, 1]."""
        if self._metric == "l2":
            return lambda s: min(1.0, max(0.0, 1.0 + float(s) / math.sqrt(2)))
        return lambda s: min(1.0, max(0.0, (1.0 + float(s)) / 2.0))

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      **kwargs: Any) -> list:
        """k documents among the fetch_k closest to the query, chosen for relevance and diversity."""
        return self.max_marginal_relevance_search_by_vector(self._embed([query], query=True)[0], k, fetch_k,
                                                            lambda_mult, **kwargs)

    def max_marginal_relevance_search_by_vector(self, embedding: list, k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, *, filter: Optional[dict] = None,
                                                **kwargs: Any) -> list:
        """k documents among the fetch_k closest to this embedding, chosen by LangChain's
        maximal_marginal_relevance over their stored embeddings."""
        _vector_only(kwargs)
        query = self._check_vectors([embedding])[0]
        hits = self._hits(query, None, fetch_k, filter, kwargs)
        if hits is None or not len(hits):
            return []
        docs = hits.docs
        stored = np.array([np.asarray(d.embedding, dtype=np.float32) for d in docs])
        chosen = maximal_marginal_relevance(np.asarray(query, dtype=np.float32), stored, lambda_mult=lambda_mult,
                                            k=min(k, len(docs)))
        return [_document(docs[i]) for i in chosen]

    @classmethod
    def from_texts(cls, texts: list, embedding: Embeddings, metadatas: Optional[list] = None, *,
                   ids: Optional[list] = None, **kwargs: Any) -> "HybridSearchVectorStore":
        """A new store (kwargs: the constructor's storage=, path=, metadata_fields=, ...)
        holding these texts."""
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # --- helpers ------------------------------------------------------------------------------
    def _search(self, vector: Any, text: Optional[str], k: int, filter: Optional[dict], options: dict) -> list:
        hits = self._hits(vector, text, k, filter, options)
        if hits is None:
            return []
        return [(_document(doc), float(score)) for doc, score in zip(hits.docs, hits.scores)]

    def _hits(self, vector: Any, text: Optional[str], k: int, filter: Optional[dict], options: dict) -> Any:
        for name, instead in _OWN_ARGUMENTS.items():
            if name in options:
                raise ConfigError(f"{name}= is set by the store from the LangChain arguments: give {instead}")
        where = self._where(filter)
        if where is col.NOTHING:
            return None
        return self._da.find(vector=vector, text=text, filter=where, limit=k, **options)

    def _where(self, flt: Optional[dict]) -> Any:
        """The filter the storage gets: the declared part as it is, the rest answered here
        (module metadata_filter) and sent as the matching ids; col.NOTHING when none match."""
        pushed, residual = metadata_filter.split(flt, self._fields)
        if residual is None:
            return pushed
        return col.id_filter(col.ids_where(self._da, lambda m: metadata_filter.matches(m, residual), where=pushed))

    def _embed(self, texts: list, query: bool = False, batch_size: Optional[int] = None) -> np.ndarray:
        if self._embedding is None:
            raise ConfigError("this store has no embedding model (embedding=None): use mode='lexical' or "
                              "the *_by_vector methods")
        try:
            if query:
                raw = [self._embedding.embed_query(t) for t in texts]
            elif batch_size:
                raw = [v for s in range(0, len(texts), batch_size)
                       for v in self._embedding.embed_documents(texts[s:s + batch_size])]
            else:
                raw = self._embedding.embed_documents(texts)
        except Exception as e:
            raise EmbeddingError(f"the embedding model {type(self._embedding).__name__} failed: {e}") from e
        return self._check_vectors(raw, len(texts), of_model=True)

    def _check_vectors(self, raw: Any, n: Optional[int] = None, of_model: bool = False) -> np.ndarray:
        """(n, d) finite float32 vectors of the store's dimension, else EmbeddingError (a model's
        output) or hs.SchemaError (a vector given by the caller)."""
        error = EmbeddingError if of_model else hs.SchemaError
        source = f"the embedding model {type(self._embedding).__name__}" if of_model else "the embedding given"
        want = getattr(self, "_dimension", None)  # unknown only while the constructor probes it
        try:
            rows = [np.asarray(v, dtype=np.float64) for v in raw]
        except (TypeError, ValueError):
            raise error(f"{source} returned something that is not a list of number vectors: "
                        "nothing was written") from None
        if n is not None and len(rows) != n:
            raise error(f"{source} returned {len(rows)} vectors for {n} texts: nothing was written")
        for i, v in enumerate(rows):
            if v.ndim != 1 or not v.size or (want and v.size != want):
                raise error(f"{source} gave vector {i} of shape {v.shape} (a wrong shape); the store's vectors have "
                            f"{want or 'one fixed'} dimensions: nothing was written")
        if len({v.size for v in rows}) > 1:
            raise error(f"{source} gave vectors of different lengths: nothing was written")
        block = np.array(rows).reshape(len(rows), -1)
        if not np.isfinite(block).all():
            raise error(f"{source} gave NaN or inf: nothing was written")
        return block.astype(np.float32)


def _vector_only(kwargs: dict) -> None:
    """The *_by_vector searches have an embedding and no text: mode= can only be "vector"."""
    mode = kwargs.pop("mode", "vector")
    if mode != "vector":
        raise ConfigError(f"the *_by_vector searches search vectors only (mode='vector'), got mode={mode!r}: for "
                          "lexical or hybrid search pass the query text to similarity_search(query, mode=...)")


def _mode(mode: Any) -> str:
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def _document(doc: Any) -> LCDocument:
    """A stored row as a LangChain Document (the storage reads its metadata back anew: editing it
    changes nothing stored)."""
    return LCDocument(id=doc.id, page_content=doc.text, metadata=doc.metadata or {})
