"""The embedding function protocol and the `hs.embedded(...)` field marker (API.md section 12).

This module imports nothing of ours beyond errors, so document.py can read the marker
while introspecting a schema.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from pydantic import Field

from hybridsearch.errors import ConfigError, SchemaError

KINDS = ("dense", "sparse", "multi")


class EmbeddingFunction:
    """Turns texts into vectors for a field declared with `hs.embedded(...)`.

    Subclass it (or use an adapter: hs.WordLlamaEmbedding, hs.SentenceTransformerEmbedding,
    hs.FastEmbedEmbedding, hs.OpenAIEmbedding) and set:

    - `name`: the function family ("wordllama", "openai", ...); `model`: which model;
      the pair and `dimension` are the identity stored with a collection on disk,
    - `dimension`: the length of each dense vector (or of each token vector for "multi";
      0 for "sparse"),
    - `kind`: "dense" (hs.Vector[d]), "sparse" (hs.SparseVector) or "multi" (hs.MultiVector[d]),
    - `batch_size`: how many texts one call of `embed_documents` receives.

    `embed_documents(texts)` returns one vector per text ((n, d) array for dense);
    `embed_query(text)` returns one vector for a query (by default embed_documents([text])[0];
    override it for models that embed queries differently, e.g. with an instruction prefix);
    `embed_queries(texts)` several queries at once (see its docstring).
    """

    name: str = "custom"
    model: str = ""
    dimension: int = 0
    kind: str = "dense"
    batch_size: int = 64

    def embed_documents(self, texts: list) -> Any:
        """One vector per text, in order: an (n, d) array for a dense function."""
        raise NotImplementedError

    def embed_query(self, text: str) -> Any:
        """The vector of one query text."""
        return self.embed_documents([text])[0]

    def embed_queries(self, texts: list) -> Any:
        """The vectors of several query texts, in order (what `find_batched(texts=...)` calls, once
        per batch). By default one `embed_documents` call when `embed_query` is not overridden
        (the two then embed alike), else one `embed_query` call per text; an adapter whose model
        embeds many queries at once overrides this."""
        if type(self).embed_query is EmbeddingFunction.embed_query:
            return self.embed_documents(list(texts))
        return [self.embed_query(t) for t in texts]

    def identity(self) -> dict:
        """What a stored collection records of this function (see identity_of)."""
        return identity_of(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, dimension={self.dimension})"


@dataclass(frozen=True, eq=False)
class Embedded:
    """The marker `hs.embedded(...)` attaches to a vector field: which text fields feed which function."""

    sources: tuple
    fn: EmbeddingFunction

    def text_of(self, values: Sequence) -> Any:
        """The text embedded for one document from its source values (in declaration order):
        the strings among them joined by a newline; None when none of them holds text."""
        parts = [v for v in values if isinstance(v, str) and v]
        return "\n".join(parts) if parts else None


def embedded(*sources: str, fn: EmbeddingFunction) -> Any:
    """Declares a vector field computed from text fields by an embedding function:

        emb: hs.Vector[256] = hs.embedded("title", "description", fn=hs.WordLlamaEmbedding())

    A document given without the field gets it from `fn` when written (extend, extend_columns,
    append, da[id] = ...); one given with it keeps its own. `find(text=..., vector="auto")`
    embeds the query with the same function."""
    if not sources or not all(isinstance(s, str) and s for s in sources):
        raise SchemaError(f"hs.embedded() takes the names of one or more text fields first, got {sources!r}")
    if len(set(sources)) != len(sources):
        raise SchemaError(f"hs.embedded() names a text field twice: {sources!r}")
    check_function(fn)
    info = Field(default=None)
    info.metadata.append(Embedded(tuple(sources), fn))
    return info


def identity_of(fn: Any) -> dict:
    """name, model, dimension and kind of an embedding function: what a stored collection records;
    reopening with another identity is a ConfigError (the stored vectors would not be comparable
    with the vectors of new queries)."""
    return {"name": str(getattr(fn, "name", type(fn).__name__)), "model": str(getattr(fn, "model", "")),
            "dimension": int(getattr(fn, "dimension", 0)), "kind": str(getattr(fn, "kind", "dense"))}


def check_function(fn: Any) -> None:
    """ConfigError unless `fn` looks like an embedding function (the attributes and methods above)."""
    if not callable(getattr(fn, "embed_documents", None)) or not callable(getattr(fn, "embed_query", None)):
        raise ConfigError(f"fn= takes an embedding function (an hs.EmbeddingFunction: embed_documents and "
                          f"embed_query), got {type(fn).__name__}")
    kind = getattr(fn, "kind", "dense")
    if kind not in KINDS:
        raise ConfigError(f"{fn!r}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    dim = getattr(fn, "dimension", None)
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 0 or (dim == 0 and kind != "sparse"):
        raise ConfigError(f"{fn!r}: dimension must be a positive integer, got {dim!r}")
    size = getattr(fn, "batch_size", 64)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ConfigError(f"{fn!r}: batch_size must be a positive integer, got {size!r}")
