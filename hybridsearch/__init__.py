"""hybridsearch: one DocumentArray API for CRUD, filters, vector, lexical and hybrid search.

The public names of API.md, nothing else.
"""
from .array import DocumentArray
from .backends import available as backends
from .document import Analyzer, Document, Keyword, Text, Vector
from .errors import (BackendError, ConfigError, FilterError, HybridSearchError, SchemaError,
                     UnsupportedError)
from .results import Hit, Results

__all__ = [
    "Analyzer", "BackendError", "ConfigError", "Document", "DocumentArray", "FilterError", "Hit",
    "HybridSearchError", "Keyword", "Results", "SchemaError", "Text", "UnsupportedError", "Vector",
    "backends",
]
__version__ = "0.1.0"
