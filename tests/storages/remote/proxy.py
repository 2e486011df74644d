"""The remote tests' view of a node from outside the storage: the engine's official client, and
an HTTP proxy on 127.0.0.1 in front of a real search node, for the failures a test cannot
get from a healthy node: a busy node (429 / 503), an error answer, a connection lost half-way,
a document refused inside a bulk answer. The storage is opened on the proxy's URL like on any
node, so the tests speak the public API only.

    proxy = FaultProxy(node_url)
    proxy.rule = lambda req: Reply(429, {...}) if req.path.endswith("/_search") else None
    da = hs.DocumentArray(Item, storage="elasticsearch", hosts=proxy.url, ...)
    proxy.requests  # every request seen: method, path, headers (lower-case names), body, time

`rule(request)` decides per request: None forwards it, `Reply(status, body)` answers without
forwarding, `DROP` closes the connection without an answer, `Forward(body=..., path=..., edit=..., status=...)`
forwards another body and/or path (e.g. with more query parameters), edits the JSON answer in
place and/or answers another status for work the node did.
"""
from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

DROP = object()
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "accept-encoding"}


@dataclass
class Seen:
    method: str
    path: str
    headers: dict
    body: bytes
    time: float = field(default_factory=time.monotonic)

    def lines(self) -> list:
        """The body as NDJSON lines (bulk, msearch)."""
        return [json.loads(ln) for ln in self.body.decode().splitlines() if ln.strip()]


@dataclass
class Reply:
    status: int
    body: dict


@dataclass
class Forward:
    body: Optional[bytes] = None  # sent instead of the request's own body
    path: Optional[str] = None  # sent instead of the request's own path (and query string)
    edit: Optional[Callable[[dict], None]] = None  # changes the node's JSON answer in place
    status: Optional[int] = None  # answered instead of the node's status (the node did the work)


def official_client(storage: str, url: str):
    """The engine's own Python client on a node, as a user would open it (to read or drop what a
    test wrote)."""
    if storage == "elasticsearch":
        from elasticsearch import Elasticsearch
        return Elasticsearch(url)
    from opensearchpy import OpenSearch
    return OpenSearch(url)


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        target = urllib.parse.urlsplit(upstream)
        self.requests: list = []
        self.rule: Optional[Callable[[Seen], object]] = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                            self.rfile.read(n) if n else b"")
                proxy.requests.append(seen)
                action = proxy.rule(seen) if proxy.rule else None
                if action is DROP:
                    self.close_connection = True
                    return
                if isinstance(action, Reply):
                    self.answer(action.status, {"content-type": "application/json",
                                                "x-elastic-product": "Elasticsearch"}, json.dumps(action.body).encode())
                    return
                body = action.body if isinstance(action, Forward) and action.body is not None else seen.body
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                path = action.path if isinstance(action, Forward) and action.path is not None else self.path
                conn.request(self.command, path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                out = {k.lower(): v for k, v in resp.getheaders() if k.lower() not in _HOP}
                if isinstance(action, Forward) and action.edit is not None:
                    answer = json.loads(data)
                    action.edit(answer)
                    data = json.dumps(answer).encode()
                if self.command == "HEAD":  # the node's length of the body it did not send
                    out["content-length"] = resp.getheader("content-length", "0")
                status = action.status if isinstance(action, Forward) and action.status else resp.status
                self.answer(status, out, data)

            def answer(self, status: int, headers: dict, data: bytes):
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "content-length" not in headers:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data and self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_one

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def seen(self, path_end: str) -> list:
        """The requests whose path (without the query) ends with `path_end`."""
        return [r for r in self.requests if urllib.parse.urlsplit(r.path).path.endswith(path_end)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
