"""`hs.storages` is both the public listing (hs.storages(), docs/usage.md; hs.backends() in API.md)
and the package the storages live in, so every way of importing a storage module keeps working.

Internal: the second half imports storage modules by their paths below the API. Each case runs
in a fresh interpreter, where the order of the imports is the one written (no earlier test has
loaded the package).
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = {
    "the listing": "import hybridsearch as hs; n = hs.storages(); assert n[:3] == ['memory', 'hnsw', 'sqlite'] "
                   "and hs.backends() == n",
    "a module by its path": "import hybridsearch.storages.local.hnsw; import hybridsearch as hs; "
                            "assert hs.storages()[:1] == ['memory']",
    "a module by its path, named": "import hybridsearch.storages.local.hnsw as h; import hybridsearch as hs; "
                                   "assert h.HnswStorage.name == 'hnsw' and 'hnsw' in hs.storages()",
    "attributes down to a module": "import hybridsearch, hybridsearch.storages.local.memory; "
                                   "assert hybridsearch.storages.local.memory.MemoryStorage.name == 'memory' "
                                   "and 'memory' in hybridsearch.storages()",
    "from the package": "from hybridsearch.storages import registry; import hybridsearch as hs; "
                        "assert sorted(hs.storages()) == sorted(registry.available())",
}


@pytest.mark.parametrize("code", list(CASES.values()), ids=list(CASES))
def test_listing_and_imports_in_a_fresh_process(code):
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
