"""storage="opensearch": OpenSearch 2.x / 3.x with the k-NN plugin (Lucene engine) through
`opensearch-py`. Everything but the client's dialect is the Elasticsearch storage's
(storage.py: SearchEngineStorage; config.py: SearchEngineConfig)."""
from __future__ import annotations

import logging

from hybridsearch.errors import ConfigError
from hybridsearch.storages.remote.elasticsearch import answers as A
from hybridsearch.storages.remote.elasticsearch.answers import failover_retries
from hybridsearch.storages.remote.elasticsearch.storage import SearchEngineStorage

log = logging.getLogger("hybridsearch")
DERIVED = "index.knn.derived_source.enabled"


class OpenSearchStorage(SearchEngineStorage):
    """OpenSearch 2.x / 3.x with the k-NN plugin (Lucene engine) through `opensearch-py`."""

    name = "opensearch"
    engine = "OpenSearch"
    _SPACE = {"cosine": "cosinesimil", "ip": "innerproduct", "l2": "l2"}

    def _make_client(self, options: dict):
        from opensearchpy import OpenSearch
        # a connection error goes on to the next of several hosts; statuses are resent by `call`
        kw = {"timeout": float(options["timeout"]), "verify_certs": bool(options["verify_certs"]),
              "max_retries": failover_retries(options["hosts"]), "retry_on_status": (), "retry_on_timeout": False}
        if options.get("basic_auth") is not None:
            kw["http_auth"] = tuple(options["basic_auth"])
        if options.get("api_key") is not None:
            kw["headers"] = {"Authorization": f"ApiKey {options['api_key']}"}
        for key in ("ca_certs", "client_cert", "client_key"):
            if options.get(key) is not None:
                kw[key] = options[key]
        hosts = options["hosts"]
        if isinstance(hosts, str) and hosts.startswith("https://"):
            kw["use_ssl"] = True
        try:
            return OpenSearch(hosts, **kw)
        except (ValueError, TypeError) as e:
            raise ConfigError(self.redact(f"cannot configure the OpenSearch client: {e}")) from None

    def _index_settings(self, options: dict) -> dict:
        settings = {**super()._index_settings(options), "index.knn": True}
        # k-NN "derived source" (on by default from OpenSearch 3.0) keeps vectors out of the
        # stored _source. On 3.5, once a scroll has read documents of a segment with it (as
        # _update_by_query and _delete_by_query do), documents it left in place (a conflict, a
        # refused write) can no longer be fetched: every search returning one fails with
        # search_phase_execution_exception. New indexes keep their vectors in _source instead.
        # The setting exists from 2.19 (off there) and is refused as unknown before.
        if self._major_version() >= 3:
            settings[DERIVED] = False
        return settings

    def _major_version(self) -> int:
        info = self.call("read the node's version", self.client.info)
        try:
            return int(str(info["version"]["number"]).split(".")[0])
        except (KeyError, TypeError, ValueError):
            return 0

    def _by_query_usable(self) -> bool:
        """False on an index with k-NN derived source (made by another tool, or by hybridsearch
        before it turned it off): there writes by condition use bulk requests, which page with
        search_after and never scroll (see `_index_settings`)."""
        res = self.call("read the index settings", self.client.indices.get_settings, index=self.index,
                        name=DERIVED, include_defaults=True, flat_settings=True)
        entry = dict(res).get(self.index, {})
        value = entry.get("settings", {}).get(DERIVED, entry.get("defaults", {}).get(DERIVED, "false"))
        if str(value).lower() == "true":
            log.info("OpenSearch index %s has k-NN derived source: writes by condition go through bulk "
                     "requests (a scroll over it can leave documents unfetchable)", self.index)
            return False
        return True

    def _vector_mapping(self, options: dict, field: str) -> dict:
        return {"type": "knn_vector", "dimension": self.schema.vectors[field].dim,
                "method": {"name": "hnsw", "engine": "lucene", "space_type": self._SPACE[self.metrics[field]],
                           "parameters": {"m": options["m"], "ef_construction": options["ef_construct"]}}}

    def _knn_clause(self, q, k, ef, flt, field) -> dict:
        inner = {"vector": [float(x) for x in q], "k": k, "method_parameters": {"ef_search": ef}}
        if flt:
            inner["filter"] = flt
        return {"knn": {field: inner}}

    def _knn_body(self, q, k, ef, flt, field) -> dict:
        return {"size": k, "query": self._knn_clause(q, k, ef, flt, field)}

    def _streaming_bulk(self, client, actions, **kwargs):
        from opensearchpy.helpers import streaming_bulk  # resends 429s only (no retry_on_status)
        return streaming_bulk(client, actions, **kwargs)

    def _client_failure(self, e):
        from opensearchpy.exceptions import ConnectionError as OSConnectionError
        from opensearchpy.exceptions import ConnectionTimeout, TransportError
        if isinstance(e, ConnectionTimeout):
            return None, f"timed out: {e.error}"
        if isinstance(e, OSConnectionError):
            return None, f"cannot connect: {type(e.info).__name__ if e.info else ''} {e.error}"
        if isinstance(e, TransportError):
            status = e.status_code if isinstance(e.status_code, int) else None
            info = e.info if isinstance(e.info, dict) else {}
            return status, f"{e.error}: {A.error_reason(info)}"
        return None
