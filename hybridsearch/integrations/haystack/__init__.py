"""Haystack 2 integration: `HybridSearchDocumentStore` and its retriever components.

    from hybridsearch.integrations.haystack import HybridSearchDocumentStore, HybridSearchBM25Retriever

Needs the `haystack` extra (``pip install "hybridsearch[haystack]"``); without it importing this
module raises ``hs.UnsupportedError`` naming it. ``import hybridsearch`` never imports Haystack.
"""
from hybridsearch.errors import missing_extra

try:
    import haystack  # noqa: F401
except ImportError:
    raise missing_extra("The Haystack document store", "haystack", "haystack") from None

from hybridsearch.integrations.haystack.filters import FilterError
from hybridsearch.integrations.haystack.retrievers import (HybridSearchBM25Retriever, HybridSearchEmbeddingRetriever,
                                                           HybridSearchHybridRetriever)
from hybridsearch.integrations.haystack.store import HybridSearchDocumentStore

__all__ = ["FilterError", "HybridSearchBM25Retriever", "HybridSearchDocumentStore", "HybridSearchEmbeddingRetriever",
           "HybridSearchHybridRetriever"]
