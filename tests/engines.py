"""Real Elasticsearch / OpenSearch / Weaviate nodes on 127.0.0.1 for the remote storages' tests.

A node is used when it answers at HS_ES_URL / HS_OS_URL (default ports 9260 / 9250,
as scripts/searchnode.sh binds them) and HS_WEAVIATE_URL (port 9290, gRPC on 50091, as
scripts/weaviatenode.sh binds it); otherwise the script is asked to fetch and start
it. Only when that fails too are the remote tests skipped, with the reason.
"""
import functools
import os
import subprocess
import urllib.request
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "searchnode.sh"
SCRIPTS = {"weaviate": SCRIPT.parent / "weaviatenode.sh"}  # kinds with a script of their own
DEFAULTS = {"es": "http://127.0.0.1:9260", "os": "http://127.0.0.1:9250", "weaviate": "http://127.0.0.1:9290"}
ENV = {"es": "HS_ES_URL", "os": "HS_OS_URL", "weaviate": "HS_WEAVIATE_URL"}
STORAGE_KIND = {"elasticsearch": "es", "opensearch": "os"}
WEAVIATE_GRPC = int(os.environ.get("HS_WEAVIATE_GRPC_PORT", "50091"))
STARTED: list = []  # kinds of node this process started


def _healthy(url: str, kind: str = "es") -> bool:
    probe = "/v1/.well-known/ready" if kind == "weaviate" else "/_cluster/health?wait_for_status=yellow&timeout=5s"
    try:
        with urllib.request.urlopen(f"{url}{probe}", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def engine(kind: str) -> tuple:
    """(url, None) of a healthy node of this kind, or (None, why not)."""
    url = os.environ.get(ENV[kind], DEFAULTS[kind])
    if not url.startswith(("http://127.0.0.1", "https://127.0.0.1", "http://localhost", "https://localhost")):
        return None, f"{ENV[kind]}={url} is not a loopback address; the tests only talk to 127.0.0.1"
    if _healthy(url, kind):
        return url, None
    if os.environ.get("HS_START_ENGINES", "1") == "0":
        return None, f"no node answers at {url} and HS_START_ENGINES=0"
    try:
        proc = subprocess.run(_command(kind, "start"), capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{' '.join(_command(kind, 'start')[1:])} failed: {e}"
    if "already running" not in proc.stdout:
        # stopped when the test session ends (tests/conftest.py); a node another process started
        # meanwhile (the script waits on its lock, then finds it running) is that process's to stop
        STARTED.append(kind)
    if proc.returncode != 0 or not _healthy(url, kind):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        return None, f"{' '.join(_command(kind, 'start')[1:])} could not start a node: {' | '.join(tail)}"
    return url, None


def _command(kind: str, verb: str) -> list:
    """The script line that starts / stops a node of this kind."""
    if kind in SCRIPTS:
        return ["bash", str(SCRIPTS[kind]), verb]
    return ["bash", str(SCRIPT), verb, kind]


def stop_started() -> None:
    """Stops the nodes this test process started (a node that was already running is left alone)."""
    while STARTED:
        subprocess.run(_command(STARTED.pop(), "stop"), capture_output=True, timeout=120)
