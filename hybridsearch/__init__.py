"""hybridsearch: one DocumentArray API for CRUD, filters, vector, lexical and hybrid search.

The public names of API.md, nothing else.
"""
from hybridsearch import storages  # a callable package: hs.storages() lists the usable storages
from hybridsearch.array import DocumentArray
from hybridsearch.document import Analyzer, Document, Keyword, MultiVector, SparseVector, Text, Vector
from hybridsearch.errors import BackendError, ClosedError, ConfigError, FilterError, HybridSearchError, SchemaError, UnsupportedError
from hybridsearch.results import Hit, Results

__all__ = [
    "Analyzer", "BackendError", "ClosedError", "ConfigError", "Document", "DocumentArray", "FilterError", "Hit",
    "HybridSearchError", "Keyword", "MultiVector", "Results", "SchemaError", "SparseVector", "Text",
    "UnsupportedError", "Vector",
    "backends", "storages",
]

backends = storages  # API.md's name for the listing; storages() is the same function
__version__ = "0.1.0"
