"""Embedding functions: vector fields computed from text fields (API.md section 12).

`hs.embedded("title", fn=...)` declares such a field; `hybridsearch.embedding.compute` fills it
on every write and embeds `find(text=..., vector="auto")` queries; `identity` keeps each
function's identity beside a stored collection. The adapters import their library lazily.
"""
from hybridsearch.embedding.adapters import FastEmbedEmbedding, SentenceTransformerEmbedding, WordLlamaEmbedding
from hybridsearch.embedding.base import Embedded, EmbeddingFunction, embedded, identity_of
from hybridsearch.embedding.http import OpenAIEmbedding

__all__ = ["Embedded", "EmbeddingFunction", "FastEmbedEmbedding", "OpenAIEmbedding", "SentenceTransformerEmbedding",
           "WordLlamaEmbedding", "embedded", "identity_of"]
