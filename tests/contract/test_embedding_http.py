"""hs.OpenAIEmbedding against a stub OpenAI-compatible server on 127.0.0.1 written here (API.md
section 12): one POST per batch, the key in the header and never in a message, vectors put
back in index order, and every failure of the server a typed EmbeddingError with nothing
written. Also: the adapters whose library is missing name their pip extra. Public API only."""
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

import hybridsearch as hs

DIM = 6
KEY = "sk-test-secret-1234"


def vector_of(text: str) -> list:
    """The stub's model: a fixed function of the text (the reference a stored vector must equal)."""
    codes = [ord(c) for c in text] or [0]
    return [float(1 + (sum(codes[i::DIM]) % 97)) for i in range(DIM)]


class Stub:
    """The server; `mode` picks what it answers, `requests` records (headers, body) of each POST."""

    def __init__(self):
        self.mode, self.requests = "ok", []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((dict(self.headers), self.path, body))
                data = [{"object": "embedding", "index": i, "embedding": vector_of(t)} for i, t in enumerate(body["input"])]
                status, answer = 200, {"object": "list", "data": data, "model": body["model"]}
                if stub.mode == "shuffled":
                    answer["data"] = data[::-1]
                elif stub.mode == "error":
                    status, answer = 429, {"error": {"message": "Rate limit reached", "type": "requests"}}
                elif stub.mode == "short":
                    answer["data"] = [dict(d, embedding=d["embedding"][:-1]) for d in data]
                elif stub.mode == "garbage":
                    answer = {"unexpected": True}
                raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def stub():
    s = Stub()
    yield s
    s.server.shutdown()
    s.server.server_close()


def schema(fn):
    class Note(hs.Document):
        title: hs.Text = ""
        emb: hs.Vector[DIM] = hs.embedded("title", fn=fn)
    return Note


@pytest.mark.parametrize("mode", ["ok", "shuffled"])
def test_one_request_per_batch_and_vectors_in_order(stub, mode):
    stub.mode = mode
    fn = hs.OpenAIEmbedding("stub-model", base_url=stub.url, api_key=KEY, dimension=DIM, batch_size=2)
    da = hs.DocumentArray(schema(fn))
    titles = ["alpha", "beta gamma", "delta", "epsilon zeta eta", "theta"]
    da.extend([{"id": str(i), "title": t} for i, t in enumerate(titles)])
    assert [body["input"] for _, _, body in stub.requests] == [titles[0:2], titles[2:4], titles[4:5]]
    for headers, path, body in stub.requests:
        assert path == "/v1/embeddings" and body["model"] == "stub-model" and "dimensions" not in body
        assert headers["Authorization"] == f"Bearer {KEY}"
    for i, t in enumerate(titles):
        np.testing.assert_array_equal(np.asarray(da[str(i)].emb), np.array(vector_of(t), dtype=np.float32))
    res = da.find(text="delta", vector="auto", limit=1)
    assert stub.requests[-1][2]["input"] == ["delta"] and res.ids == ["2"]


@pytest.mark.parametrize("mode,message", [("error", "HTTP 429.*Rate limit reached"), ("short", "shape"),
                                          ("garbage", "unexpected body")])
def test_a_failing_server_writes_nothing(stub, mode, message):
    fn = hs.OpenAIEmbedding("stub-model", base_url=stub.url, api_key=KEY, dimension=DIM, batch_size=2)
    da = hs.DocumentArray(schema(fn))
    da.extend([{"id": "kept", "title": "first"}])
    stub.mode = mode
    with pytest.raises(hs.EmbeddingError, match=message) as info:
        da.extend([{"id": str(i), "title": f"t{i}"} for i in range(3)])
    assert KEY not in str(info.value)
    assert [d.id for d in da] == ["kept"]


def test_an_unreachable_server():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fn = hs.OpenAIEmbedding("m", base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, dimension=DIM, timeout=5)
    da = hs.DocumentArray(schema(fn))
    with pytest.raises(hs.EmbeddingError, match="cannot be reached") as info:
        da.append({"title": "x"})
    assert KEY not in str(info.value) and len(da) == 0


def test_send_dimensions_and_known_models(stub):
    fn = hs.OpenAIEmbedding("stub-model", base_url=stub.url, dimension=DIM, send_dimensions=True)
    fn.embed_documents(["a"])
    assert stub.requests[-1][2]["dimensions"] == DIM
    assert hs.OpenAIEmbedding("text-embedding-3-small").dimension == 1536  # no request made
    with pytest.raises(hs.ConfigError, match="give dimension="):
        hs.OpenAIEmbedding("my-local-model", base_url=stub.url)
    with pytest.raises(hs.ConfigError, match="http"):
        hs.OpenAIEmbedding("m", base_url="ftp://x", dimension=3)


@pytest.mark.parametrize("adapter,module,extra", [("SentenceTransformerEmbedding", "sentence_transformers",
                                                   "sentence-transformers"),
                                                  ("FastEmbedEmbedding", "fastembed", "fastembed"),
                                                  ("WordLlamaEmbedding", "wordllama", "embeddings")])
def test_a_missing_library_names_its_extra(monkeypatch, adapter, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: the import raises ImportError
    with pytest.raises(hs.UnsupportedError, match=rf'pip install "hybridsearch\[{extra}\]"'):
        getattr(hs, adapter)()
