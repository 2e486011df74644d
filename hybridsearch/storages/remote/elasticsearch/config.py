"""The options of storage="elasticsearch" and "opensearch" (`SearchEngineConfig`) and the
credentials among them, which every message and repr redacts."""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from hybridsearch.errors import ConfigError
from hybridsearch.storages.config import integer, option, path_or_none, StrPath
from hybridsearch.storages.remote.base import RemoteConfig, userinfo_secrets
from hybridsearch.storages.remote.elasticsearch import query as Q


def secret_strings(options: dict) -> list:
    """The password of basic_auth, the API key (both parts of an (id, key) pair) and the
    credentials written into the host URLs."""
    out = []
    auth = options.get("basic_auth")
    if isinstance(auth, (tuple, list)) and len(auth) == 2:
        out.append(str(auth[1]))
    key = options.get("api_key")
    if isinstance(key, (tuple, list)):
        out += [str(k) for k in key]
    elif key:
        out.append(str(key))
    hosts = options.get("hosts")
    for h in (hosts if isinstance(hosts, (list, tuple)) else [hosts]):
        out += userinfo_secrets(h)
    return out


def _hosts(v):
    if isinstance(v, str) and v:
        return v
    if isinstance(v, (list, tuple)) and v and all(isinstance(h, (str, dict)) for h in v):
        return list(v)
    raise ValueError("a URL or a list of URLs")


def _pair_or_none(v):
    if v is None:
        return None
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return tuple(v)
    raise ValueError("a (user, password) pair or None")


def _refresh(v):
    if v == "wait_for" or v is True:
        return v
    raise ValueError("'wait_for' or True (writes must be visible on return)")


def _index_name(v):
    try:
        return Q.check_index_name(v)
    except ConfigError as e:
        raise ValueError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class SearchEngineConfig(RemoteConfig):
    """Options of storage="elasticsearch" and "opensearch"."""

    hosts: Any = option("http://127.0.0.1:9200", _hosts,
                        "the node URL(s); a user:password@ in one is sent as basic auth, never shown",
                        secret=True)  # only the URLs without user:password appear (stats, errors)
    index: str = option("hybridsearch", _index_name, "the index of this collection (created from the schema "
                        "on first open)")
    m: int = option(16, integer(2), "links per node of the index's HNSW graph (the mapping's m)")
    ef_construct: int = option(100, integer(1), "beam width while indexing (the mapping's ef_construction)")
    ef: int = option(100, integer(1), "num_candidates (Elasticsearch) / ef_search (OpenSearch) of a vector "
                     "query; find(ef=...) overrides it")
    refresh: Any = option("wait_for", _refresh, "how a write is visible when it returns: 'wait_for' the next "
                          "refresh, or True to force one")
    chunk_size: int = option(500, integer(1), "documents per bulk request")
    basic_auth: Any = option(None, _pair_or_none, "(user, password) for the node", secret=True)
    api_key: Any = option(None, None, "an API key (string or (id, key))", secret=True)
    client_cert: Optional[StrPath] = option(None, path_or_none, "client certificate (mutual TLS)")
    client_key: Optional[StrPath] = option(None, path_or_none, "client key (mutual TLS)")
    shards: int = option(1, integer(1), "primary shards of a new index")
    replicas: int = option(0, integer(0), "replicas of a new index")
