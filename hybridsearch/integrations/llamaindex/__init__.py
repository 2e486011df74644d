"""LlamaIndex vector store over any hybridsearch storage (API.md section 13, docs/integrations/llamaindex.md).

`HybridSearchVectorStore(storage="sqlite", path="nodes.db", metadata_fields={"year": int})` is a
`llama_index.core.vector_stores.types.BasePydanticVectorStore`: dense, lexical (BM25) and hybrid
queries, every MetadataFilters operator, over memory, hnsw, sqlite, the wrapped and the remote
storages alike. Needs llama-index-core: `pip install "hybridsearch[llamaindex]"`.
"""
from hybridsearch.errors import missing_extra

try:
    import llama_index.core.vector_stores.types  # noqa: F401
except ImportError as e:  # only a missing framework is the extra's business; anything else surfaces
    if not (e.name or "").startswith("llama_index"):
        raise
    raise missing_extra("the LlamaIndex vector store", "llama_index", "llamaindex") from None

from hybridsearch.integrations.llamaindex.store import HybridSearchVectorStore  # noqa: E402

__all__ = ["HybridSearchVectorStore"]
