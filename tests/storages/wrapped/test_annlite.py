"""storage="annlite": the shared suite (test_array, test_filters, test_paging, test_columns_hostile, the
annlite cases of test_reliability and test_lexical), tests/storages/wrapped/annlite_cases.py and
tests/engine/annlite_storage_cases.py, in a child process.

annlite and hnswlib both register a native class named "Index", so they cannot be
imported into one process; this test process uses hnswlib, so annlite runs in a
child pytest with HS_TEST_STORAGES=annlite (tests/conftest.py)."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("annlite") is None,
                                reason="annlite is not installed (pip install -e '.[test]' installs it)")


def _child_pytest(*args) -> str:
    env = dict(os.environ, HS_TEST_STORAGES="annlite", HS_TEST_WORKERS="0")  # one process: it runs inside a worker
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summary = out.strip().splitlines()[-1]
    assert "skipped" not in summary, summary
    return summary


def test_shared_suite_and_annlite_cases_in_a_child_process():
    summary = _child_pytest("tests/contract/test_array.py", "tests/contract/test_filters.py",
                            "tests/storages/wrapped/annlite_cases.py", "tests/engine/annlite_storage_cases.py")
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 70, summary  # the whole shared suite ran on annlite, not a handful


def test_reliability_suite_on_annlite_in_a_child_process():
    # only the tests parametrised over storages: the others (hnsw, sqlite) run in this process
    summary = _child_pytest("tests/contract/test_reliability.py", "tests/contract/test_crash.py",
                            "tests/contract/test_remote_embedded_reliability.py", "-k", "annlite")
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 30, summary


def test_reopen_and_query_options_on_annlite_in_a_child_process():
    summary = _child_pytest("tests/contract/test_reopen.py", "tests/contract/test_options_hostile.py", "-k", "annlite")
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 60, summary


def test_paging_and_text_refusals_on_annlite_in_a_child_process():
    # API.md section 7 against its models, and the text options refused saying why (annlite has
    # no lexical engine); the tests not parametrised over storages run in this process
    summary = _child_pytest("tests/contract/test_paging.py", "tests/contract/test_lexical.py",
                            "tests/contract/test_executor.py", "-k", "annlite")
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 14, summary  # 12 of test_paging, 1 of test_lexical, 1 of test_executor


def test_hostile_columns_on_annlite_in_a_child_process():
    # extend_columns' refusals write nothing and accepted columns equal their documents
    summary = _child_pytest("tests/contract/test_columns_hostile.py")
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 36, summary


def test_serializable_writes_on_annlite_in_a_child_process():
    # tests/contract/test_serializable.py: racing writes by condition, and threads against a serial model
    summary = _child_pytest("tests/contract/test_serializable.py")
    assert re.search(r"\b5 passed", summary), summary


def test_registry_refuses_annlite_after_hnswlib():
    code = ("import hybridsearch as hs\n"
            "class V(hs.Document):\n    v: hs.Vector[2]\n"
            "hs.DocumentArray(V, storage='hnswlib').close()\n"
            "assert 'annlite' not in hs.backends()\n"
            "try:\n    hs.DocumentArray(V, storage='annlite')\n"
            "except hs.UnsupportedError as e:\n    print('refused:', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "refused:" in proc.stdout and "already loaded 'hnswlib'" in proc.stdout
