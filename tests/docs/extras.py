"""Which extra a failed docs block or example needs, when its library is really missing.

A page about an optional storage (hnswlib, annlite, qdrant, ...) cannot run on a plain install:
`hs.UnsupportedError` "... needs hnswlib (not installed here): pip install "hybridsearch[hnswlib]""
or a bare ModuleNotFoundError stops it. The docs test skips such a page with the extra's name, but
only where the module is really absent: where it is installed (CI, this machine) the same error is
a failure. Standard library only: the child process run_blocks.py imports it too.
"""
from __future__ import annotations

import importlib.util
import re
from typing import Optional

# import name -> extra of pyproject.toml that installs it
EXTRA_OF = {"pandas": "pandas", "pyarrow": "arrow", "rich": "progress", "hnswlib": "hnswlib",
            "annlite": "annlite", "elasticsearch": "elasticsearch", "opensearchpy": "opensearch",
            "requests": "vespa", "weaviate": "weaviate", "qdrant_edge": "qdrant", "qdrant_client": "qdrant",
            "wordllama": "embeddings", "matplotlib": "bench", "llama_index": "llamaindex",
            "haystack": "haystack"}
_UNSUPPORTED = re.compile(r"needs (?P<module>[\w.]+) \(not installed here\): pip install \"hybridsearch\[(?P<extra>[\w-]+)\]\"")
_NOT_FOUND = re.compile(r"ModuleNotFoundError: No module named '(?P<module>[\w.]+)'")


def missing(module: str) -> bool:
    """True when `module` cannot be imported because it is not installed."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is None
    except ImportError:  # a finder that refuses the name (tests hide a package this way)
        return True
    except ValueError:  # a module already imported without a spec
        return False


def _reason(module: str, extra: Optional[str]) -> Optional[str]:
    top = module.split(".")[0]
    extra = extra or EXTRA_OF.get(top)
    if extra is None or not missing(top):
        return None
    return f'needs the extra "{extra}" ({top} is not installed): pip install "hybridsearch[{extra}]"'


def skip_reason(error: BaseException) -> Optional[str]:
    """Why a block that raised `error` is skipped (an extra's library is missing), or None: a failure."""
    if isinstance(error, ModuleNotFoundError) and error.name:
        return _reason(error.name, None)
    m = _UNSUPPORTED.search(str(error)) if type(error).__name__ == "UnsupportedError" else None
    return _reason(m["module"], m["extra"]) if m else None


def skip_reason_of_output(stderr: str) -> Optional[str]:
    """skip_reason for a script that died: read from the last line of its traceback."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    last = lines[-1]
    m = _NOT_FOUND.search(last)
    if m:
        return _reason(m["module"], None)
    m = _UNSUPPORTED.search(last) if "UnsupportedError" in last else None
    return _reason(m["module"], m["extra"]) if m else None
