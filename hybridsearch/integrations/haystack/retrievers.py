"""Haystack retriever components over a HybridSearchDocumentStore: embedding, BM25 and hybrid."""
from __future__ import annotations

from typing import Any, Optional

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.document_stores.types import FilterPolicy, apply_filter_policy

import hybridsearch as hs
from hybridsearch.integrations.haystack.store import HybridSearchDocumentStore


class _Retriever:
    """What the three retrievers share: the store, init filters and their policy, top_k, serialisation."""

    def __init__(self, document_store: HybridSearchDocumentStore, filters: Optional[dict] = None, top_k: int = 10,
                 filter_policy: FilterPolicy = FilterPolicy.REPLACE, return_embedding: bool = False,
                 **params: Any) -> None:
        if not isinstance(document_store, HybridSearchDocumentStore):
            raise hs.ConfigError(f"document_store is a HybridSearchDocumentStore, got {type(document_store).__name__}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise hs.ConfigError(f"top_k is an integer > 0, got {top_k!r}")
        self.document_store = document_store
        self.filters = filters
        self.top_k = top_k
        self.filter_policy = FilterPolicy.from_str(filter_policy) if isinstance(filter_policy, str) else filter_policy
        self.return_embedding = return_embedding
        self._params = params

    def _args(self, filters: Optional[dict], top_k: Optional[int], return_embedding: Optional[bool]) -> dict:
        return {"filters": apply_filter_policy(self.filter_policy, self.filters, filters),
                "top_k": self.top_k if top_k is None else top_k,
                "return_embedding": self.return_embedding if return_embedding is None else return_embedding}

    def to_dict(self) -> dict[str, Any]:
        """Serialised with the store's own to_dict."""
        return default_to_dict(self, document_store=self.document_store.to_dict(), filters=self.filters,
                               top_k=self.top_k, filter_policy=self.filter_policy.value,
                               return_embedding=self.return_embedding, **self._params)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """The component `to_dict` describes (its store reopened from its own dict)."""
        params = data.get("init_parameters", {})
        params["document_store"] = HybridSearchDocumentStore.from_dict(params["document_store"])
        if "filter_policy" in params:
            params["filter_policy"] = FilterPolicy.from_str(params["filter_policy"])
        return default_from_dict(cls, data)


@component
class HybridSearchEmbeddingRetriever(_Retriever):
    """The `top_k` Documents nearest to a query embedding (vector search of the store's storage;
    `exact=True` for brute force on an approximate storage). Documents without an embedding
    are never returned. Scores: the storage's metric (cosine similarity by default)."""

    def __init__(self, document_store: HybridSearchDocumentStore, filters: Optional[dict] = None, top_k: int = 10,
                 filter_policy: FilterPolicy = FilterPolicy.REPLACE, return_embedding: bool = False,
                 exact: bool = False) -> None:
        # @component rebuilds the class, so no zero-argument super() here
        _Retriever.__init__(self, document_store, filters, top_k, filter_policy, return_embedding, exact=exact)
        self.exact = exact

    @component.output_types(documents=list[Document])
    def run(self, query_embedding: list[float], filters: Optional[dict] = None, top_k: Optional[int] = None,
            return_embedding: Optional[bool] = None) -> dict[str, list[Document]]:
        """{"documents": the nearest Documents, best first, each with its score}."""
        return {"documents": self.document_store.embedding_retrieval(
            query_embedding, exact=self.exact, **self._args(filters, top_k, return_embedding))}

    @component.output_types(documents=list[Document])
    async def run_async(self, query_embedding: list[float], filters: Optional[dict] = None,
                        top_k: Optional[int] = None, return_embedding: Optional[bool] = None) -> dict[str, list[Document]]:
        """run, off the event loop."""
        return {"documents": await self.document_store.embedding_retrieval_async(
            query_embedding, exact=self.exact, **self._args(filters, top_k, return_embedding))}


@component
class HybridSearchBM25Retriever(_Retriever):
    """The `top_k` Documents best matching a query by BM25 over their content (k1=1.2, b=0.75;
    the query is an OR of its words). Scores: BM25. The query is natural language: quotes,
    a leading + or - and * are read as the words around them; `query_syntax=True` reads them as
    hybridsearch's query syntax ("phrases", +required, -excluded, prefix*)."""

    def __init__(self, document_store: HybridSearchDocumentStore, filters: Optional[dict] = None, top_k: int = 10,
                 filter_policy: FilterPolicy = FilterPolicy.REPLACE, return_embedding: bool = False,
                 query_syntax: bool = False) -> None:
        # @component rebuilds the class, so no zero-argument super() here
        _Retriever.__init__(self, document_store, filters, top_k, filter_policy, return_embedding,
                            query_syntax=query_syntax)
        self.query_syntax = query_syntax

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: Optional[dict] = None, top_k: Optional[int] = None,
            return_embedding: Optional[bool] = None) -> dict[str, list[Document]]:
        """{"documents": the best matching Documents, best first, each with its BM25 score}."""
        return {"documents": self.document_store.bm25_retrieval(query, query_syntax=self.query_syntax,
                                                                **self._args(filters, top_k, return_embedding))}

    @component.output_types(documents=list[Document])
    async def run_async(self, query: str, filters: Optional[dict] = None, top_k: Optional[int] = None,
                        return_embedding: Optional[bool] = None) -> dict[str, list[Document]]:
        """run, off the event loop."""
        return {"documents": await self.document_store.bm25_retrieval_async(
            query, query_syntax=self.query_syntax, **self._args(filters, top_k, return_embedding))}


@component
class HybridSearchHybridRetriever(_Retriever):
    """BM25 on a query and vector search on its embedding in one call, fused by the store
    (`fusion` "rrf" (default), "sum" or "linear" with `weights` {"text": a, "vector": b}). The
    query is plain words unless `query_syntax=True`, as for HybridSearchBM25Retriever."""

    def __init__(self, document_store: HybridSearchDocumentStore, filters: Optional[dict] = None, top_k: int = 10,
                 filter_policy: FilterPolicy = FilterPolicy.REPLACE, return_embedding: bool = False,
                 fusion: str = "rrf", weights: Optional[dict] = None, query_syntax: bool = False) -> None:
        # @component rebuilds the class, so no zero-argument super() here
        _Retriever.__init__(self, document_store, filters, top_k, filter_policy, return_embedding,
                            fusion=fusion, weights=weights, query_syntax=query_syntax)
        self.fusion, self.weights, self.query_syntax = fusion, weights, query_syntax

    @component.output_types(documents=list[Document])
    def run(self, query: str, query_embedding: list[float], filters: Optional[dict] = None,
            top_k: Optional[int] = None, return_embedding: Optional[bool] = None) -> dict[str, list[Document]]:
        """{"documents": the fused best Documents, best first, each with its fused score}."""
        return {"documents": self.document_store.hybrid_retrieval(
            query, query_embedding, fusion=self.fusion, weights=self.weights, query_syntax=self.query_syntax,
            **self._args(filters, top_k, return_embedding))}
