"""storage="opensearch": OpenSearch 2.x / 3.x with the k-NN plugin (Lucene engine) through
`opensearch-py`. Everything but the client's dialect is the Elasticsearch storage's
(storage.py: SearchEngineStorage, SearchEngineConfig)."""
from __future__ import annotations

from hybridsearch.errors import ConfigError
from hybridsearch.storages.remote.elasticsearch.storage import LEXICAL, SearchEngineStorage


class OpenSearchStorage(SearchEngineStorage):
    """OpenSearch 2.x / 3.x with the k-NN plugin (Lucene engine) through `opensearch-py`."""

    name = "opensearch"
    engine = "OpenSearch"
    _SPACE = {"cosine": "cosinesimil", "ip": "innerproduct", "l2": "l2"}

    def _make_client(self, options: dict):
        from opensearchpy import OpenSearch
        kw = {"timeout": float(options["timeout"]), "verify_certs": bool(options["verify_certs"]),
              "max_retries": 0, "retry_on_timeout": False}
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
        return {**super()._index_settings(options), "index.knn": True}

    def _vector_mapping(self, options: dict) -> dict:
        return {"type": "knn_vector", "dimension": self.vec.dim,
                "method": {"name": "hnsw", "engine": "lucene", "space_type": self._SPACE[self.metric],
                           "parameters": {"m": options["m"], "ef_construction": options["ef_construct"]}}}

    def _knn_clause(self, q, k, ef, flt) -> dict:
        inner = {"vector": [float(x) for x in q], "k": k, "method_parameters": {"ef_search": ef}}
        if flt:
            inner["filter"] = flt
        return {"knn": {self.vec.name: inner}}

    def _knn_body(self, q, k, ef, flt) -> dict:
        return {"size": k, "query": self._knn_clause(q, k, ef, flt)}

    def _hybrid_body(self, text, q, size, ef, flt) -> dict:
        lexical = {"multi_match": {"query": text, "fields": self.texts, "type": "best_fields", "_name": LEXICAL}}
        return {"size": size, "query": {"bool": {"should": [lexical, self._knn_clause(q, size, ef, flt)],
                                                 "filter": [flt] if flt else [], "minimum_should_match": 1}}}

    def _streaming_bulk(self, client, actions, **kwargs):
        from opensearchpy.helpers import streaming_bulk  # resends 429s only (no retry_on_status)
        return streaming_bulk(client, actions, **kwargs)

    def failure(self, e):
        from opensearchpy.exceptions import ConnectionError as OSConnectionError
        from opensearchpy.exceptions import ConnectionTimeout, TransportError
        if isinstance(e, ConnectionTimeout):
            return None, f"timed out: {e.error}"
        if isinstance(e, OSConnectionError):
            return None, f"cannot connect: {type(e.info).__name__ if e.info else ''} {e.error}"
        if isinstance(e, TransportError):
            status = e.status_code if isinstance(e.status_code, int) else None
            info = e.info if isinstance(e.info, dict) else {}
            err = info.get("error", {})
            reason = err.get("reason") if isinstance(err, dict) else err
            return status, f"{e.error}: {reason or ''}"
        return None
