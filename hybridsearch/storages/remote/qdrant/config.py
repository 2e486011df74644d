"""The options of storage="qdrant"."""
from __future__ import annotations

import dataclasses
from typing import Optional

from hybridsearch.errors import ConfigError
from hybridsearch.storages.config import integer, option, path_or_none, StrPath, text_or_none
from hybridsearch.storages.remote.base import RemoteConfig, userinfo_secrets


@dataclasses.dataclass(frozen=True)
class QdrantConfig(RemoteConfig):
    """Options of storage="qdrant". Without `url`: qdrant-edge, embedded, in `path` (a
    temporary directory removed on close when None). With `url`: a Qdrant server through
    qdrant-client (":memory:" or "local:DIR": the client's pure-Python local mode)."""

    path: Optional[StrPath] = option(None, path_or_none, "the shard's directory (embedded qdrant-edge); None: a "
                                 "temporary one, removed on close")
    url: Optional[str] = option(None, text_or_none, "a Qdrant server's URL (qdrant-client); ':memory:' or "
                                "'local:DIR' for the client's local mode", secret=True)
    collection: Optional[str] = option(None, text_or_none, "the collection on the server (url=); None: the "
                                       "model's name, lowercased")
    api_key: Optional[str] = option(None, None, "the server's API key (url=)", secret=True)
    optimize_after: Optional[int] = option(20000, integer(1, allow_none=True),
                                           "before a vector query, run Qdrant's optimizer (HNSW build) when this many "
                                           "points were written since its last run (embedded); None: never")

    def validate(self) -> None:
        if self.url is not None and self.path is not None:
            raise ConfigError("storage 'qdrant' takes either path= (embedded qdrant-edge) or url= (a server), not both")


def secret_strings(config: QdrantConfig) -> list:
    """What of the options must never be shown: the API key and a URL's user:password."""
    return [config.api_key] + userinfo_secrets(config.url)
