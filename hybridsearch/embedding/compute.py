"""Computing the vectors of hs.embedded fields: for documents, for columns and for a query.

Every write embeds before anything reaches the storage, one `embed_documents` call per batch
of `fn.batch_size` texts, and checks every output (count, shape, NaN / inf, norm): a failing
or misbehaving model raises EmbeddingError and the write is refused whole.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from hybridsearch.document import Kind, Schema, validate_value, vector_norm_problem
from hybridsearch.embedding.base import Embedded
from hybridsearch.errors import ConfigError, EmbeddingError, HybridSearchError, SchemaError

_NOTHING = "; nothing was written"


def embed_texts(schema: Schema, name: str, texts: list, suffix: str = _NOTHING) -> list:
    """The checked stored values of field `name` for `texts`, in order, in batches of fn.batch_size."""
    fn = schema.embedded[name].fn
    spec = schema.fields[name]
    out: list = []
    size = fn.batch_size
    for start in range(0, len(texts), size):
        part = texts[start:start + size]
        raw = _call(fn, fn.embed_documents, part, f"embedding {len(part)} texts for {schema.name}.{name}", suffix)
        out.extend(_check_batch(schema, spec, fn, raw, len(part), suffix))
    return out


def _call(fn, method, arg, what: str, suffix: str) -> Any:
    try:
        return method(arg)
    except HybridSearchError:
        raise  # an adapter's own typed error already says what went wrong
    except Exception as e:  # noqa: BLE001 -- a user's model may raise anything; it becomes one typed error
        raise EmbeddingError(f"{fn!r} failed {what}: {type(e).__name__}: {e}{suffix}") from e


def _check_batch(schema: Schema, spec, fn, raw: Any, n: int, suffix: str) -> list:
    where = f"{fn!r} for {schema.name}.{spec.name}"
    if spec.kind is Kind.VECTOR:
        block = _dense_block(raw, where, suffix)
        if block.shape != (n, spec.dim):
            raise EmbeddingError(f"{where} returned an array of shape {block.shape} for {n} texts, "
                                 f"expected ({n}, {spec.dim}){suffix}")
        _check_finite(block, where, suffix)
        rows = []
        for row in block:
            row = row.copy()
            row.flags.writeable = False  # as the schema's validator leaves a stored vector
            rows.append(row)
        return rows
    try:
        values = list(raw)
    except TypeError:
        raise EmbeddingError(f"{where} returned {type(raw).__name__}, expected one value per text{suffix}") from None
    if len(values) != n:
        raise EmbeddingError(f"{where} returned {len(values)} values for {n} texts{suffix}")
    out = []
    for i, v in enumerate(values):
        try:
            out.append(validate_value(schema, spec.name, v))
        except SchemaError as e:
            raise EmbeddingError(f"{where} returned a bad value for text {i}: {e}{suffix}") from None
    return out


def _dense_block(raw: Any, where: str, suffix: str) -> np.ndarray:
    if isinstance(raw, np.ndarray) and raw.dtype.kind == "c":
        raise EmbeddingError(f"{where} returned complex numbers{suffix}")
    try:
        with np.errstate(over="ignore"):
            return np.array(raw, dtype=np.float32, ndmin=2)
    except (TypeError, ValueError, OverflowError):
        raise EmbeddingError(f"{where} returned {type(raw).__name__}, not an array of numbers{suffix}") from None


def _check_finite(block: np.ndarray, where: str, suffix: str) -> None:
    if not np.isfinite(block).all():
        row = int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
        raise EmbeddingError(f"{where} returned NaN or inf (text {row}){suffix}")
    problem = vector_norm_problem(block)
    if problem:
        raise EmbeddingError(f"{where} returned a vector that cannot be stored: {problem}{suffix}")


def fill_documents(schema: Schema, docs: list) -> list:
    """The validated documents with every missing hs.embedded field computed (a document given
    with the field keeps its own); the list itself when nothing is missing."""
    for name, marker in schema.embedded.items():
        todo = [i for i, d in enumerate(docs) if getattr(d, name) is None]
        if not todo:
            continue
        texts = [_text(schema, name, marker, [getattr(docs[i], s) for s in marker.sources], docs[i].id)
                 for i in todo]
        keep = [(i, t) for i, t in zip(todo, texts) if t is not None]
        values = embed_texts(schema, name, [t for _, t in keep])
        docs = list(docs)
        for (i, _), value in zip(keep, values):
            docs[i] = docs[i].model_copy(update={name: value})
    return docs


def _text(schema: Schema, name: str, marker: Embedded, values: list, id: Any) -> Optional[str]:
    text = marker.text_of(values)
    if text is None and not schema.fields[name].optional:
        raise SchemaError(f"document {id!r} has neither {name} nor text in {', '.join(marker.sources)} "
                          f"to embed it from; nothing was written")
    return text


def fill_columns(schema: Schema, cols: dict) -> dict:
    """Columns (name -> values, as frames.as_column_dict gives them) with every hs.embedded field
    computed where it is missing: the whole column when absent, else the rows holding None."""
    n = max((len(v) for v in cols.values()), default=0)
    for name, marker in schema.embedded.items():
        given = cols.get(name)
        if given is None:
            todo = list(range(n))
        elif isinstance(given, np.ndarray) and given.dtype != object:
            continue  # an (n, d) block: every row given
        else:
            given = list(given)
            todo = [i for i, v in enumerate(given) if v is None]
        if not todo:
            continue
        sources = []
        for s in marker.sources:
            col = cols.get(s)
            if col is None:
                raise SchemaError(f"{schema.name}.{name} is computed from {', '.join(marker.sources)}: "
                                  f"give the column {s!r} or the column {name!r}; nothing was written")
            sources.append(col)
        texts = []
        for i in todo:
            values = [col[i] for col in sources]
            bad = next((v for v in values if v is not None and not isinstance(v, str)), None)
            if bad is not None:
                raise SchemaError(f"{schema.name}: row {i} of a column {name} is embedded from holds "
                                  f"{type(bad).__name__} {bad!r}, not a string; nothing was written")
            texts.append(_text(schema, name, marker, values, f"row {i}"))
        keep = [(i, t) for i, t in zip(todo, texts) if t is not None]
        values = embed_texts(schema, name, [t for _, t in keep])
        column = list(given) if given is not None else [None] * n
        for (i, _), value in zip(keep, values):
            column[i] = value
        cols = {**cols, name: column}
    return cols


def query_vectors(schema: Schema, text: Any) -> dict:
    """`find(text=..., vector="auto")`: field -> the query's vector for every hs.embedded field."""
    if not schema.embedded:
        raise ConfigError(f'vector="auto" embeds the text query for fields declared with hs.embedded(...); '
                          f"{schema.name} has none")
    if not isinstance(text, str):
        raise ConfigError(f'vector="auto" embeds the text= query: give text= a string, got {type(text).__name__}')
    out = {}
    for name, marker in schema.embedded.items():
        fn, spec = marker.fn, schema.fields[name]
        raw = _call(fn, fn.embed_query, text, f"embedding the query for {schema.name}.{name}", "")
        if spec.kind is Kind.VECTOR:
            where = f"{fn!r} for the query of {schema.name}.{name}"
            block = _dense_block(raw, where, "")
            if block.shape != (1, spec.dim):
                raise EmbeddingError(f"{where} returned shape {np.shape(raw)}, expected ({spec.dim},)")
            _check_finite(block, where, "")
            out[name] = block[0]
        else:
            out[name] = _check_batch(schema, spec, fn, [raw], 1, "")[0]
    return out


def query_vectors_batched(schema: Schema, texts: list) -> list:
    """`find_batched(vectors="auto", texts=[...])`: one {field: vector} per text for every
    hs.embedded field, each field's queries embedded in batches of fn.batch_size, one
    `embed_queries` call per batch (a function without that method: `embed_query` per text)."""
    if not schema.embedded:
        raise ConfigError(f'vectors="auto" embeds the texts= queries for fields declared with hs.embedded(...); '
                          f"{schema.name} has none")
    out: list = [{} for _ in texts]
    for name, marker in schema.embedded.items():
        fn, spec = marker.fn, schema.fields[name]
        many = getattr(fn, "embed_queries", None)
        if not callable(many):
            def many(part, fn=fn):  # a duck-typed function: one query at a time
                return [fn.embed_query(t) for t in part]
        for start in range(0, len(texts), fn.batch_size):
            part = texts[start:start + fn.batch_size]
            raw = _call(fn, many, part, f"embedding {len(part)} queries for {schema.name}.{name}", "")
            for i, value in enumerate(_check_batch(schema, spec, fn, raw, len(part), "")):
                out[start + i][name] = value
    return out
