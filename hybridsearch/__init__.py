"""hybridsearch: one DocumentArray API for CRUD, filters, vector, lexical and hybrid search.

The public names of API.md, nothing else.
"""
from typing import TYPE_CHECKING

from hybridsearch import storages  # a callable package: hs.storages() lists the usable storages
from hybridsearch.array import DocumentArray
from hybridsearch.embedding import (EmbeddingFunction, FastEmbedEmbedding, OpenAIEmbedding,
                                    SentenceTransformerEmbedding, WordLlamaEmbedding, embedded)
from hybridsearch.document import Analyzer, Document, Keyword, MultiVector, SparseVector, Text, Vector
from hybridsearch.errors import (BackendError, ClosedError, ConfigError, EmbeddingError, FilterError, HybridSearchError, RerankError,
                                 SchemaError, UnsupportedError)
from hybridsearch.query.rerank import CrossEncoderReranker, LinearReranker, RRFReranker
from hybridsearch.restore import restore
from hybridsearch.results import Hit, Results

__all__ = [
    "Analyzer", "BackendError", "ClosedError", "ConfigError", "Document", "DocumentArray", "FilterError", "Hit",
    "HybridSearchError", "Keyword", "MultiVector", "Results", "SchemaError", "SparseVector", "Text",
    "UnsupportedError", "Vector",
    "CrossEncoderReranker", "LinearReranker", "RRFReranker", "RerankError",
    "EmbeddingError", "EmbeddingFunction", "FastEmbedEmbedding", "OpenAIEmbedding", "SentenceTransformerEmbedding",
    "WordLlamaEmbedding", "embedded",
    "backends", "restore", "storages",
]

def __getattr__(name: str):
    """hs.HnswConfig, hs.SqliteConfig, ... (registry.CONFIG_NAMES): each storage's config
    dataclass, for DocumentArray(P, storage=..., config=...). Loaded on first use: a wrapped
    storage's config imports its library (so they are not in __all__ either)."""
    from hybridsearch.storages.registry import CONFIG_NAMES, storage_class
    if name in CONFIG_NAMES:
        return storage_class(CONFIG_NAMES[name]).Config
    raise AttributeError(f"module 'hybridsearch' has no attribute {name!r}")


if TYPE_CHECKING:  # what an editor completes; at run time __getattr__ loads them
    from hybridsearch.storages.local.hnsw import HnswConfig  # noqa: F401
    from hybridsearch.storages.local.memory import MemoryConfig  # noqa: F401
    from hybridsearch.storages.local.sqlite.storage import SqliteConfig  # noqa: F401
    from hybridsearch.storages.remote.elasticsearch.config import SearchEngineConfig as ElasticsearchConfig  # noqa: F401
    from hybridsearch.storages.remote.elasticsearch.config import SearchEngineConfig as OpenSearchConfig  # noqa: F401
    from hybridsearch.storages.remote.qdrant.config import QdrantConfig  # noqa: F401
    from hybridsearch.storages.remote.vespa.storage import VespaConfig  # noqa: F401
    from hybridsearch.storages.remote.weaviate.config import WeaviateConfig  # noqa: F401
    from hybridsearch.storages.wrapped.annlite.storage import AnnliteConfig  # noqa: F401
    from hybridsearch.storages.wrapped.hnswlib import HnswlibConfig  # noqa: F401

backends = storages  # API.md's name for the listing; storages() is the same function
__version__ = "0.1.0"
