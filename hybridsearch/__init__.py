"""hybridsearch: one DocumentArray API for CRUD, filters, vector, lexical and hybrid search.

The public names of API.md, nothing else.
"""
from hybridsearch import storages  # a callable package: hs.storages() lists the usable storages
from hybridsearch.array import DocumentArray
from hybridsearch.embedding import (EmbeddingFunction, FastEmbedEmbedding, OpenAIEmbedding,
                                    SentenceTransformerEmbedding, WordLlamaEmbedding, embedded)
from hybridsearch.document import Analyzer, Document, Keyword, MultiVector, SparseVector, Text, Vector
from hybridsearch.errors import (BackendError, ConfigError, EmbeddingError, FilterError, HybridSearchError, RerankError,
                                 SchemaError, UnsupportedError)
from hybridsearch.query.rerank import CrossEncoderReranker, LinearReranker, RRFReranker
from hybridsearch.results import Hit, Results

__all__ = [
    "Analyzer", "BackendError", "ConfigError", "Document", "DocumentArray", "FilterError", "Hit",
    "HybridSearchError", "Keyword", "MultiVector", "Results", "SchemaError", "SparseVector", "Text",
    "UnsupportedError", "Vector",
    "CrossEncoderReranker", "LinearReranker", "RRFReranker", "RerankError",
    "EmbeddingError", "EmbeddingFunction", "FastEmbedEmbedding", "OpenAIEmbedding", "SentenceTransformerEmbedding",
    "WordLlamaEmbedding", "embedded",
    "backends", "storages",
]

backends = storages  # API.md's name for the listing; storages() is the same function
__version__ = "0.1.0"
