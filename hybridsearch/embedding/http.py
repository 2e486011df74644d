"""An embedding function over an OpenAI-compatible HTTP endpoint (POST {base_url}/embeddings).

OpenAI itself, and the servers speaking its API (vLLM, llama.cpp server, Ollama, LM Studio,
text-embeddings-inference, LiteLLM). Python's own urllib does the HTTP: no extra package.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Optional

import numpy as np

from hybridsearch.embedding.base import EmbeddingFunction
from hybridsearch.errors import ConfigError, EmbeddingError

# the dimensions of OpenAI's own models, so `OpenAIEmbedding("text-embedding-3-small")` needs no dimension=
_KNOWN = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class OpenAIEmbedding(EmbeddingFunction):
    """Embeddings from an OpenAI-compatible endpoint.

    `OpenAIEmbedding("text-embedding-3-small")` calls api.openai.com with $OPENAI_API_KEY;
    `OpenAIEmbedding("nomic-embed-text", base_url="http://127.0.0.1:11434/v1", dimension=768)`
    a local server. `dimension` is required for models other than OpenAI's own;
    `send_dimensions=True` asks the server for that many dimensions (text-embedding-3-*).
    One request per batch of `batch_size` texts; a failed request raises EmbeddingError
    (the API key never appears in a message)."""

    name = "openai"

    def __init__(self, model: str = "text-embedding-3-small", *, base_url: str = "https://api.openai.com/v1",
                 api_key: Optional[str] = None, dimension: Optional[int] = None, send_dimensions: bool = False,
                 batch_size: int = 256, timeout: float = 60.0) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(f"OpenAIEmbedding needs a model name, got {model!r}")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"OpenAIEmbedding base_url must be an http(s) URL, got {base_url!r}")
        dimension = _KNOWN.get(model) if dimension is None else dimension
        if dimension is None:
            raise ConfigError(f"OpenAIEmbedding({model!r}): give dimension= (the length of its vectors); "
                              f"it is known only for {', '.join(_KNOWN)}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not timeout > 0:
            raise ConfigError(f"OpenAIEmbedding timeout must be a positive number of seconds, got {timeout!r}")
        self.model, self.dimension, self.batch_size = model, dimension, batch_size
        self.url = base_url.rstrip("/") + "/embeddings"
        self._key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.send_dimensions, self.timeout = send_dimensions, float(timeout)

    def embed_documents(self, texts: list) -> np.ndarray:
        """One POST for the texts; the vectors in the order of the texts."""
        body = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        if self.send_dimensions:
            body["dimensions"] = self.dimension
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raise EmbeddingError(f"{self.url} answered HTTP {e.code} for {len(texts)} texts: "
                                 f"{_detail(e)}; nothing was written") from None
        except (urllib.error.URLError, OSError) as e:
            raise EmbeddingError(f"{self.url} cannot be reached: {getattr(e, 'reason', e)}; nothing was written") from None
        except ValueError as e:
            raise EmbeddingError(f"{self.url} answered something that is not JSON ({e}); nothing was written") from None
        return self._vectors(payload, len(texts))

    def _vectors(self, payload, n: int) -> np.ndarray:
        try:
            items = sorted(payload["data"], key=lambda d: d["index"])
            if [d["index"] for d in items] != list(range(n)):
                raise ValueError(f"indices {[d['index'] for d in items]} for {n} texts")
            return np.asarray([d["embedding"] for d in items], dtype=np.float32).reshape(n, -1)
        except (KeyError, TypeError, ValueError) as e:
            raise EmbeddingError(f"{self.url} answered an unexpected body ({type(e).__name__}: {e}); "
                                 "expected {\"data\": [{\"index\": i, \"embedding\": [...]}, ...]}; "
                                 "nothing was written") from None


def _detail(e: urllib.error.HTTPError) -> str:
    try:
        text = e.read().decode("utf-8", "replace")
    except OSError:
        return str(e.reason)
    try:
        message = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = text
    return str(message)[:300]
