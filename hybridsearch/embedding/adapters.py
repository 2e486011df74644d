"""Embedding functions over local libraries: wordllama, sentence-transformers, fastembed.

Each library is imported when the function is made, never at `import hybridsearch`; a missing
one raises the error naming its pip extra. None of them downloads here unless its library
does so itself (wordllama: the 256-d weights ship in its wheel and are loaded from there).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from hybridsearch.embedding.base import EmbeddingFunction
from hybridsearch.errors import ConfigError, EmbeddingError, missing_extra


class WordLlamaEmbedding(EmbeddingFunction):
    """Static word embeddings from wordllama (`pip install "hybridsearch[embeddings]"`): fast on
    a CPU, no download (the default 256-d "l2_supercat" weights ship in the wheel). `dim` picks a
    truncation of the 1024-d model (64, 128, 256, 512, 1024; only 256 ships in the wheel)."""

    name = "wordllama"

    def __init__(self, config: str = "l2_supercat", dim: int = 256, batch_size: int = 256) -> None:
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError:
            raise missing_extra("WordLlamaEmbedding", "wordllama", "embeddings") from None
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights come from the wheel, never the network
        try:
            self._model = WordLlama.load(config=config, dim=dim, cache_dir=Path(wordllama.__file__).parent,
                                         disable_download=True)
        except Exception as e:  # noqa: BLE001 -- wordllama raises several types for missing weights
            raise ConfigError(f"wordllama cannot load {config!r} at dimension {dim} from its wheel "
                              f"(only l2_supercat at 256 ships there): {type(e).__name__}: {e}") from None
        self.model, self.dimension, self.batch_size = config, int(dim), batch_size

    def embed_documents(self, texts: list) -> np.ndarray:
        """L2-normalised (n, dim) float32 vectors."""
        return np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32).reshape(len(texts), -1)


class SentenceTransformerEmbedding(EmbeddingFunction):
    """A sentence-transformers model (`pip install "hybridsearch[sentence-transformers]"`), e.g.
    "all-MiniLM-L6-v2"; the library downloads the model on first use. `query_prefix` /
    `document_prefix` are prepended for models trained with instructions (e5: "query: ")."""

    name = "sentence-transformers"

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, device: Optional[str] = None, normalize: bool = True,
                 batch_size: int = 64, query_prefix: str = "", document_prefix: str = "") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise missing_extra("SentenceTransformerEmbedding", "sentence-transformers",
                                "sentence-transformers") from None
        self._model = SentenceTransformer(model, device=device)
        self.model, self.batch_size, self.normalize = model, batch_size, normalize
        self.dimension = int(self._model.get_sentence_embedding_dimension())
        self.query_prefix, self.document_prefix = query_prefix, document_prefix

    def _encode(self, texts: list) -> np.ndarray:
        return np.asarray(self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=self.normalize,
                                             convert_to_numpy=True), dtype=np.float32)

    def embed_documents(self, texts: list) -> np.ndarray:
        """(n, dimension) float32 vectors."""
        return self._encode([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector (with query_prefix)."""
        return self._encode([self.query_prefix + text])[0]

    def embed_queries(self, texts: list) -> np.ndarray:
        """(n, dimension) query vectors (with query_prefix) in one encode call."""
        return self._encode([self.query_prefix + t for t in texts])


class FastEmbedEmbedding(EmbeddingFunction):
    """A fastembed ONNX model (`pip install "hybridsearch[fastembed]"`), e.g.
    "BAAI/bge-small-en-v1.5"; fastembed downloads the model on first use. Queries go through
    fastembed's query_embed (the model's query instruction, where it has one)."""

    name = "fastembed"

    def __init__(self, model: str = "BAAI/bge-small-en-v1.5", *, batch_size: int = 64, **options: Any) -> None:
        try:
            from fastembed import TextEmbedding
        except ImportError:
            raise missing_extra("FastEmbedEmbedding", "fastembed", "fastembed") from None
        self._model = TextEmbedding(model_name=model, **options)
        self.model, self.batch_size = model, batch_size
        dims = [m.get("dim") for m in TextEmbedding.list_supported_models() if m.get("model") == model]
        self.dimension = int(dims[0]) if dims and dims[0] else len(self.embed_query("dimension"))

    def embed_documents(self, texts: list) -> np.ndarray:
        """(n, dimension) float32 vectors."""
        return np.asarray(list(self._model.embed(list(texts), batch_size=self.batch_size)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector."""
        out = list(self._model.query_embed(text))
        if len(out) != 1:
            raise EmbeddingError(f"{self!r}: fastembed returned {len(out)} vectors for one query")
        return np.asarray(out[0], dtype=np.float32)

    def embed_queries(self, texts: list) -> np.ndarray:
        """(n, dimension) query vectors in one query_embed call."""
        return np.asarray(list(self._model.query_embed(list(texts))), dtype=np.float32)
