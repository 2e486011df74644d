"""Real Elasticsearch / OpenSearch / Weaviate nodes on 127.0.0.1 for the remote storages' tests.

A node is used when it answers at HS_ES_URL / HS_OS_URL (default ports 9260 / 9250,
as scripts/searchnode.sh binds them) and HS_WEAVIATE_URL (port 9290, gRPC on 50091, as
scripts/weaviatenode.sh binds it); otherwise the script is asked to fetch and start
it. Only when that fails too are the remote tests skipped, with the reason.

The three-node clusters ("es3" / "os3": HTTP ports 9271-9273 / 9281-9283, or the comma-separated
URLs in HS_ES3_URL / HS_OS3_URL) are used only with HS_START_CLUSTER=1 (six more JVMs, and the
shared suite once more on each: opt-in), and then started by scripts/searchcluster.sh unless they
answer with three nodes. Their storages
("elasticsearch-cluster", "opensearch-cluster") get the list of the three URLs as `hosts`.
"""
import functools
import os
import subprocess
import urllib.request
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "searchnode.sh"
CLUSTER_SCRIPT = SCRIPT.with_name("searchcluster.sh")
SCRIPTS = {"weaviate": SCRIPT.parent / "weaviatenode.sh"}  # kinds with a script of their own
DEFAULTS = {"es": "http://127.0.0.1:9260", "os": "http://127.0.0.1:9250", "weaviate": "http://127.0.0.1:9290",
            "es3": ",".join(f"http://127.0.0.1:{p}" for p in (9271, 9272, 9273)),
            "os3": ",".join(f"http://127.0.0.1:{p}" for p in (9281, 9282, 9283))}
ENV = {"es": "HS_ES_URL", "os": "HS_OS_URL", "weaviate": "HS_WEAVIATE_URL", "es3": "HS_ES3_URL", "os3": "HS_OS3_URL"}
STORAGE_KIND = {"elasticsearch": "es", "opensearch": "os",
                "elasticsearch-cluster": "es3", "opensearch-cluster": "os3"}
WEAVIATE_GRPC = int(os.environ.get("HS_WEAVIATE_GRPC_PORT", "50091"))
STARTED: list = []  # kinds of node (or cluster) this process started
# under pytest-xdist the workers start nodes and the controller stops them once every worker is
# done (a worker that finished early must not stop a node the others still use): the workers
# append the kinds they started to this file, which the controller names in their environment
STARTED_FILE_ENV = "HS_TEST_STARTED_FILE"


def _healthy(url: str, kind: str = "es", nodes: int = 1) -> bool:
    probe = ("/v1/.well-known/ready" if kind == "weaviate"
             else f"/_cluster/health?wait_for_status=yellow&wait_for_nodes={nodes}&timeout=5s")
    try:
        with urllib.request.urlopen(f"{url}{probe}", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def engine(kind: str) -> tuple:
    """(url, None) of a healthy node of this kind (a cluster: the list of its three URLs), or
    (None, why not)."""
    urls = os.environ.get(ENV[kind], DEFAULTS[kind]).split(",")
    cluster = kind.endswith("3")
    for url in urls:
        if not url.startswith(("http://127.0.0.1", "https://127.0.0.1", "http://localhost", "https://localhost")):
            return None, f"{ENV[kind]}={url} is not a loopback address; the tests only talk to 127.0.0.1"
    found = (urls if cluster else urls[0]), None
    if cluster and os.environ.get("HS_START_CLUSTER", "0") != "1":
        # opt-in even when one answers: the shared suite on a cluster takes many minutes
        return None, "the cluster tests run with HS_START_CLUSTER=1 (tests/README.md)"
    if _healthy(urls[0], kind, len(urls)):
        return found
    if os.environ.get("HS_START_ENGINES", "1") == "0":
        return None, f"no node answers at {urls[0]} and HS_START_ENGINES=0"
    try:
        proc = subprocess.run(_command(kind, "start"), capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{' '.join(_command(kind, 'start')[1:])} failed: {e}"
    if "already running" not in proc.stdout:
        # stopped when the test session ends (tests/conftest.py); a node another process started
        # meanwhile (the script waits on its lock, then finds it running) is that process's to stop
        _record_started(kind)
    if proc.returncode != 0 or not _healthy(urls[0], kind, len(urls)):
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        return None, f"{' '.join(_command(kind, 'start')[1:])} could not start a node: {' | '.join(tail)}"
    return found


def _command(kind: str, verb: str) -> list:
    """The script line that starts / stops a node (or a cluster: "es3" / "os3") of this kind."""
    if kind in SCRIPTS:
        return ["bash", str(SCRIPTS[kind]), verb]
    if kind.endswith("3"):
        return ["bash", str(CLUSTER_SCRIPT), verb, kind[:2]]
    return ["bash", str(SCRIPT), verb, kind]


def _record_started(kind: str) -> None:
    shared = os.environ.get(STARTED_FILE_ENV)
    if shared:
        with open(shared, "a") as f:
            f.write(kind + "\n")
    else:
        STARTED.append(kind)


def stop_started() -> None:
    """Stops the nodes this test run started (a node that was already running is left alone):
    those of this process, and those its xdist workers recorded in the shared file."""
    shared = os.environ.get(STARTED_FILE_ENV)
    if shared and os.path.exists(shared):
        with open(shared) as f:
            STARTED.extend(k for k in dict.fromkeys(f.read().split()) if k not in STARTED)
        os.remove(shared)
    while STARTED:
        subprocess.run(_command(STARTED.pop(), "stop"), capture_output=True, timeout=300)
