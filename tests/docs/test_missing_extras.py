"""The docs run on a plain install: a page or example whose optional library is missing is skipped,
naming the extra that installs it; where the library is installed the same error still fails.

A missing library is simulated in the child process (tests/hidden_modules.py): every library is
installed here.
"""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.hidden_modules import env_without

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

def _run_page(page: Path, tmp_path: Path, hidden: tuple = ()) -> dict:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    result = tmp_path / "result.json"
    out = subprocess.run([sys.executable, str(HERE / "run_blocks.py"), str(page), page.name, str(result)],
                         cwd=work, env=env_without(tmp_path, hidden), capture_output=True, text=True, timeout=300)
    got = json.loads(result.read_text()) if result.exists() else {"status": "crashed"}
    got["stderr"] = out.stderr[-2000:]
    return got


@pytest.mark.parametrize("page, module, extra", [
    ("docs/storages/hnswlib.md", "hnswlib", "hnswlib"),
    ("docs/storages/qdrant.md", "qdrant_edge", "qdrant"),
    ("docs/integrations/llamaindex.md", "llama_index", "llamaindex"),
    ("docs/integrations/haystack.md", "haystack", "haystack"),
])
def test_a_page_whose_library_is_missing_is_skipped_naming_the_extra(tmp_path, page, module, extra):
    got = _run_page(ROOT / page, tmp_path, hidden=(module,))
    assert got["status"] == "skipped", got
    assert f'hybridsearch[{extra}]' in got["reason"] and module in got["reason"], got


def test_the_same_error_fails_where_the_library_is_installed(tmp_path):
    pytest.importorskip("hnswlib")
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent("""\
        ```python
        from hybridsearch.errors import missing_extra
        raise missing_extra("storage 'hnswlib'", "hnswlib", "hnswlib")
        ```
        """))
    assert _run_page(page, tmp_path)["status"] == "failed"


def test_a_missing_module_no_extra_installs_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nimport no_such_module_of_any_extra\n```\n")
    assert _run_page(page, tmp_path)["status"] == "failed"


def test_an_example_whose_library_is_missing_is_skipped(tmp_path):
    from tests.docs.extras import skip_reason_of_output
    script = tmp_path / "example.py"
    script.write_text("import hybridsearch as hs\n"
                      "class P(hs.Document):\n    v: hs.Vector[2]\n"
                      "hs.DocumentArray(P, storage='hnswlib')\n")
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env_without(tmp_path, ("hnswlib",)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    # the parent process has hnswlib: the reason is read as the child saw it, with the module hidden
    why = subprocess.run([sys.executable, "-c", "import sys; from tests.docs.extras import skip_reason_of_output as s;"
                          " print(s(sys.stdin.read()))"], input=out.stderr, env=env_without(tmp_path, ("hnswlib",)),
                         capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    assert 'hybridsearch[hnswlib]' in why, (why, out.stderr[-1000:])
    assert skip_reason_of_output(out.stderr) is None  # here hnswlib is installed: a failure
