"""LangChain VectorStore over any hybridsearch storage (pip install "hybridsearch[langchain]").

    from hybridsearch.integrations.langchain import HybridSearchVectorStore

Importing this module imports langchain-core; without it the import raises
hs.UnsupportedError naming the extra. `import hybridsearch` never imports a framework.
"""
from hybridsearch.errors import missing_extra

try:
    import langchain_core.vectorstores  # noqa: F401
except ImportError:
    raise missing_extra("hybridsearch.integrations.langchain", "langchain_core", "langchain") from None

from hybridsearch.integrations.langchain.store import HybridSearchVectorStore  # noqa: E402

__all__ = ["HybridSearchVectorStore"]
