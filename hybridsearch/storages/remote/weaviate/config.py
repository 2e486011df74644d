"""The options of storage="weaviate" and the collection Weaviate keeps for a schema (pure
functions, no I/O): property definitions, the vector index, the name check and the fingerprint
recorded in the collection's description."""
from __future__ import annotations

import dataclasses
import json
import re
import uuid
from typing import Optional

from hybridsearch.document import Kind, Schema
from hybridsearch.errors import ConfigError
from hybridsearch.storages.config import integer, option
from hybridsearch.storages.remote.base import EXTRA_FIELD, ID_FIELD, PRESENT_FIELD, SEQ_FIELD, RemoteConfig, http_url, uuid_of

META = "hybridsearch:"  # the collection description starts with this, then the fingerprint
# ids are uuid5 of the original id in this namespace (Weaviate takes only uuids as object ids)
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/hybridsearch/ids")
_NAME = re.compile(r"^[A-Za-z][_0-9A-Za-z]{0,230}$")
_PROPERTY = re.compile(r"^[_A-Za-z][_0-9A-Za-z]{0,230}$")
RESERVED = {"_additional", "_id", "id", "vector", "_vector"}
DISTANCE = {"cosine": "COSINE", "ip": "DOT", "l2": "L2_SQUARED"}


def object_id(id: str) -> uuid.UUID:
    """The Weaviate object id of a document id."""
    return uuid_of(NAMESPACE, id)


def collection_name(name) -> str:
    """The collection name as Weaviate keeps it (first letter upper case), or ValueError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("a Weaviate collection name: a letter, then letters, digits or _ (at most 231)")
    return name[0].upper() + name[1:]


@dataclasses.dataclass(frozen=True)
class WeaviateConfig(RemoteConfig):
    """Options of storage="weaviate"."""

    url: str = option("http://127.0.0.1:8080", http_url, "the server's REST URL (http://host:port)")
    grpc_port: int = option(50051, integer(1), "the server's gRPC port (same host; queries and batches use it)")
    collection: str = option("Hybridsearch", collection_name, "the collection of this DocumentArray (created "
                             "from the schema on first open; Weaviate capitalises the first letter)")
    m: int = option(16, integer(2), "maxConnections of the collection's HNSW index")
    ef_construct: int = option(128, integer(1), "efConstruction of the collection's HNSW index")
    ef: int = option(64, integer(1), "ef of the HNSW index; a query asks for max(limit, ef) neighbours "
                     "(find(ef=...) overrides it per query)")
    api_key: Optional[str] = option(None, None, "an API key (Weaviate Cloud or an API-key server)", secret=True)
    batch_size: int = option(500, integer(1), "objects per batch request")
    max_results: int = option(10000, integer(1), "the server's QUERY_MAXIMUM_RESULTS: the most objects one "
                              "query may return (offset + limit)")
    exact_max: int = option(10000, integer(0), "a multi-vector find is exhaustive MaxSim when at most this many "
                            "documents match and hold the field; above it Weaviate's multi-vector index gives "
                            "candidates, rescored exactly")


def fingerprint(schema: Schema, metric) -> str:
    """What must match when an existing collection is opened again: the schema and the metric
    (one string for a one-vector schema, as collections before named vectors recorded it; the
    dict field -> metric of a collection with named vectors)."""
    return json.dumps(schema.fingerprint() + [metric])


def named_layout(schema: Schema) -> bool:
    """Whether the collection keeps its vectors as named vectors, one per vector field (several
    dense fields, or a multi-vector field), rather than as the object's one default vector (a
    schema of at most one dense field: the layout of collections written before named vectors)."""
    return len(schema.vectors) > 1 or bool(schema.multi)


def check_vector_name(name: str) -> str:
    if not _PROPERTY.match(name):
        raise ConfigError(f"field {name!r} cannot be a Weaviate named vector: a name is a letter or _, then "
                          "letters, digits or _ (at most 231)")
    return name


def check_property(name: str) -> str:
    if not _PROPERTY.match(name) or name in RESERVED or name[0].isupper():
        raise ConfigError(f"field {name!r} cannot be a Weaviate property: a property name is a lowercase letter "
                          f"or _, then letters, digits or _, and not one of {sorted(RESERVED)}")
    return name


def properties(schema: Schema) -> list:
    """The collection's properties: text -> TEXT with word tokenization (lowercased runs of
    letters and digits, BM25-searchable), keyword and the id -> TEXT with field tokenization
    (the whole string, filterable only), numbers and bools, hs_present as a TEXT[] and the
    unindexed fields' JSON unindexed. The vector is the object's own vector, not a property."""
    from weaviate.classes.config import DataType, Property, Tokenization

    def text(name, searchable=False, tokenization=Tokenization.FIELD, filterable=True):
        return Property(name=name, data_type=DataType.TEXT, tokenization=tokenization,
                        index_searchable=searchable, index_filterable=filterable)

    out = [text(ID_FIELD), Property(name=SEQ_FIELD, data_type=DataType.INT, index_range_filters=True),
           Property(name=PRESENT_FIELD, data_type=DataType.TEXT_ARRAY, tokenization=Tokenization.FIELD,
                    index_searchable=False),
           Property(name=EXTRA_FIELD, data_type=DataType.TEXT, index_searchable=False, index_filterable=False)]
    scalars = {Kind.INT: DataType.INT, Kind.FLOAT: DataType.NUMBER, Kind.BOOL: DataType.BOOL}
    for spec in schema.fields.values():
        if spec.kind is Kind.TEXT:
            out.append(text(check_property(spec.name), True, Tokenization.WORD, filterable=False))
        elif spec.kind is Kind.KEYWORD:
            out.append(text(check_property(spec.name)))
        elif spec.kind in scalars:
            out.append(Property(name=check_property(spec.name), data_type=scalars[spec.kind],
                                index_range_filters=spec.kind is not Kind.BOOL))
    return out


def vector_config(schema: Schema, metrics: dict, metric: str, m: int, ef_construct: int, ef: int):
    """Self-provided vectors (no vectorizer module), each in an HNSW index with its metric's
    distance: the object's one default vector (`metric`), or with `named_layout` one named vector
    per dense field and one multi-vector (MaxSim aggregation) per hs.MultiVector field."""
    from weaviate.classes.config import Configure, VectorDistances

    def index(metric: str):
        return Configure.VectorIndex.hnsw(distance_metric=getattr(VectorDistances, DISTANCE[metric]),
                                          max_connections=m, ef_construction=ef_construct, ef=ef)

    if not named_layout(schema):
        return Configure.Vectors.self_provided(vector_index_config=index(metric))
    out = [Configure.Vectors.self_provided(name=check_vector_name(f), vector_index_config=index(metrics[f]))
           for f in schema.vectors]
    out += [Configure.MultiVectors.self_provided(
        name=check_vector_name(f), vector_index_config=index(metrics[f]),
        multi_vector_config=Configure.VectorIndex.MultiVector.multi_vector()) for f in schema.multi]
    return out


def inverted_config():
    """BM25 with Lucene's k1 / b and no stopwords (Weaviate's default drops English ones)."""
    from weaviate.classes.config import Configure, StopwordsPreset
    return Configure.inverted_index(bm25_k1=1.2, bm25_b=0.75, stopwords_preset=StopwordsPreset.NONE)
