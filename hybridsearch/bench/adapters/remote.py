"""Elasticsearch / OpenSearch / Weaviate nodes for the benchmarks: which one answers where, its process id
(for its CPU time), the options a benchmark collection gets, and the index dropped afterwards.
Plain HTTP on loopback; no private part of the storages is used."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
REMOTE = ("elasticsearch", "opensearch", "weaviate")
KIND = {"elasticsearch": "es", "opensearch": "os"}            # storage -> scripts/searchnode.sh name
ENV = {"elasticsearch": "HS_ES_URL", "opensearch": "HS_OS_URL", "weaviate": "HS_WEAVIATE_URL"}
DEFAULT_URL = {"elasticsearch": "http://127.0.0.1:9260", "opensearch": "http://127.0.0.1:9250",
               "weaviate": "http://127.0.0.1:9290"}
CLIENT = {"elasticsearch": "elasticsearch", "opensearch": "opensearchpy", "weaviate": "weaviate"}  # client modules
HEALTH = {"weaviate": "/v1/.well-known/ready"}                # the others: /_cluster/health
WEAVIATE_GRPC = int(os.environ.get("HS_WEAVIATE_GRPC_PORT", "50091"))


def start_line(storage: str) -> str:
    """The command that starts a node of this engine."""
    return "scripts/weaviatenode.sh start" if storage == "weaviate" else f"scripts/searchnode.sh start {KIND[storage]}"


def _http(method: str, url: str, timeout: float = 10.0):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def node_url(storage: str) -> str:
    """The URL where the benchmark looks for this engine ($HS_ES_URL / $HS_OS_URL or the default)."""
    return os.environ.get(ENV[storage], DEFAULT_URL[storage])


def node_pid(storage: str) -> int | None:
    """The node's process id from scripts/searchnode.sh (None when the script cannot tell)."""
    script = ROOT / "scripts" / ("weaviatenode.sh" if storage == "weaviate" else "searchnode.sh")
    if not script.exists():
        return None
    p = subprocess.run(["bash", str(script), "pid"] + ([KIND[storage]] if storage in KIND else []),
                       capture_output=True, text=True, check=False)
    return int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip().isdigit() else None


def find_node(storage: str, url: str | None = None) -> tuple:
    """(url, pid) of a node of this engine answering its health check, or (None, None)."""
    url = url or node_url(storage)
    try:
        status, _ = _http("GET", url + HEALTH.get(storage, "/_cluster/health"), timeout=3)
    except OSError:
        return None, None
    return (url, node_pid(storage)) if status == 200 else (None, None)


def collection_options(url: str, storage: str = "elasticsearch") -> dict:
    """DocumentArray options of a fresh benchmark index on the node at `url`: a unique index name,
    writes visible when they return, bulk requests of 2,000 documents (Weaviate: a unique
    collection, batches of 2,000 objects, and queries of up to the 1,000,000 objects
    scripts/weaviatenode.sh lets the server return; $HS_WEAVIATE_MAX_RESULTS for another node)."""
    if storage == "weaviate":
        return {"url": url, "grpc_port": WEAVIATE_GRPC, "collection": f"HsBench{uuid.uuid4().hex}",
                "batch_size": 2000, "max_results": int(os.environ.get("HS_WEAVIATE_MAX_RESULTS", "1000000"))}
    return {"hosts": url, "index": f"hs-bench-{uuid.uuid4().hex}", "refresh": True, "chunk_size": 2000}


def drop_index(url: str, index: str, storage: str = "elasticsearch") -> None:
    """Deletes a benchmark index / collection (quietly: a node that went away leaves nothing to clean)."""
    try:
        _http("DELETE", f"{url}/v1/schema/{index}" if storage == "weaviate" else f"{url}/{index}")
    except OSError:
        pass


def segments(url: str, index: str) -> int | None:
    """How many Lucene segments the index has now (None when the node does not say)."""
    try:
        return len(json.loads(_http("GET", f"{url}/_cat/segments/{index}?format=json")[1]))
    except (OSError, ValueError):
        return None
