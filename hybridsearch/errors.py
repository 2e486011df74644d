"""The exception types of the public API (API.md section 6)."""


class HybridSearchError(Exception):
    """Base of every error hybridsearch raises on purpose."""


class SchemaError(HybridSearchError, ValueError):
    """A document or value does not fit the schema (wrong type, dimension, NaN, missing field)."""


class IdError(SchemaError, TypeError):
    """A document id that is not a string. Also a TypeError, as it was before ids had their
    SchemaError, so code catching TypeError still does."""


class FilterError(HybridSearchError, ValueError):
    """A filter names an unknown field or operator, or compares a field to a value of the wrong type."""


class ConfigError(HybridSearchError, ValueError):
    """An unknown storage or option, or an option value out of range."""


class ClosedError(ConfigError):
    """The DocumentArray was closed: every call after close() raises it (a ConfigError, as before
    it had a type of its own, so code catching ConfigError still does)."""


class UnsupportedError(HybridSearchError, NotImplementedError):
    """The storage cannot do what was asked (yet); the message says why."""


class BackendError(HybridSearchError, RuntimeError):
    """A storage failed: an unreachable or erroring engine, or a corrupt file."""


class RerankError(HybridSearchError, RuntimeError):
    """A reranker (find(rerank=...)) failed, or returned scores that cannot rank the hits: not
    one finite number per document."""


class EmbeddingError(HybridSearchError, RuntimeError):
    """An embedding function failed or returned vectors of the wrong shape, NaN or inf; nothing
    was written (API.md section 12)."""


def missing_extra(what: str, package: str, extra: str) -> UnsupportedError:
    """The error of an optional feature whose package is not installed, naming the pip line."""
    return UnsupportedError(f'{what} needs {package} (not installed here): pip install "hybridsearch[{extra}]"')
