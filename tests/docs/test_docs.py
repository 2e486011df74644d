"""The docs run: every ```python block of README.md and docs/**/*.md, and every examples/*.py.

As sqlite-utils' tests/test_docs.py does for its docs, so they cannot drift from the code:

- the blocks of one Markdown file run in order, in one namespace (a block may use what an
  earlier one defined), in a temporary working directory, in a process of their own
  (annlite and hnswlib cannot share a process; a block may register a storage);
- a block whose fence reads ```python node=elasticsearch (or opensearch, vespa) needs a
  running search node: it runs only where one answers, with the node's URL in HS_ES_URL /
  HS_OS_URL / HS_VESPA_URL (the block reads it from there). Elasticsearch and OpenSearch
  nodes are found, or started, as for the rest of the suite (tests/engines.py); with
  HS_START_ENGINES=0 and no node answering, that block and the rest of its file are skipped
  with a reason naming the node. Vespa is never started: set HS_VESPA_URL;
- a page or example that fails because an optional library is not installed is skipped with the
  name of the extra that installs it (tests/docs/extras.py), only where that library really is
  missing: where it is installed the same error fails;
- examples/*.py run as scripts;
- the Options table of each docs/storages/<name>.md page equals the one generated from the
  storage's config dataclass (tests/docs/option_tables.py --write regenerates them);
- every file a page links to or names as a repository path (`hybridsearch/...`, `tests/...`)
  exists.
"""
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.docs import option_tables
from tests.docs.extras import skip_reason_of_output
from tests.docs.blocks import python_blocks
from tests.engines import STORAGE_KIND, engine

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MARKDOWN = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
URL_ENV = {"elasticsearch": "HS_ES_URL", "opensearch": "HS_OS_URL", "vespa": "HS_VESPA_URL",
           "weaviate": "HS_WEAVIATE_URL"}
TIMEOUT = 600

# Pages expected to fail, with the reason (none: every page runs).
NOT_YET: dict = {}
TOP = ("API.md", "README.md", "benchmarks/", "docs/", "examples/", "hybridsearch/", "kernels/", "scripts/",
       "tests/", "setup.py", "pyproject.toml", ".ci/")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"`((?:" + "|".join(re.escape(t) for t in TOP) + r")[^`\s]*)`")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _vespa() -> tuple:
    url = os.environ.get("HS_VESPA_URL")
    if not url:
        return None, "HS_VESPA_URL is not set (the tests never start a Vespa node)"
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/state/v1/health", timeout=10) as r:
            if r.status == 200:
                return url, None
    except OSError as e:
        return None, f"no Vespa node answers at {url}: {e}"
    return None, f"no Vespa node answers at {url}"


def _node(kind: str) -> tuple:
    """(url, None) of a running node of this kind, or (None, why not)."""
    if kind == "vespa":
        return _vespa()
    return engine(STORAGE_KIND.get(kind, kind))  # weaviate is a kind of its own


def _run(cmd: list, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def _env(extra: dict) -> dict:
    env = dict(os.environ, **extra)
    env.setdefault("PYTHONHASHSEED", "0")
    env["MPLBACKEND"] = "Agg"
    return env


def _markdown_params():
    for path in MARKDOWN:
        rel = _rel(path)
        if not python_blocks(path.read_text(encoding="utf-8"), rel):
            continue  # prose only (its links are checked below)
        marks = [pytest.mark.xfail(reason=NOT_YET[rel], strict=False)] if rel in NOT_YET else []
        yield pytest.param(path, id=rel, marks=marks)


@pytest.mark.parametrize("path", list(_markdown_params()))
def test_markdown_blocks_run(path, tmp_path):
    rel = _rel(path)
    blocks = python_blocks(path.read_text(encoding="utf-8"), rel)
    env, unavailable = {}, []
    for kind in dict.fromkeys(b.node for b in blocks if b.node):
        url, why = _node(kind)
        if url is None:
            unavailable.append(f"{kind}=no {kind} node: {why}")
        else:
            env[URL_ENV[kind]] = url
    result_path = tmp_path / "result.json"
    work = tmp_path / "work"
    work.mkdir()
    out = _run([sys.executable, str(HERE / "run_blocks.py"), str(path), rel, str(result_path), *unavailable],
               work, _env(env))
    result = json.loads(result_path.read_text()) if result_path.exists() else {"status": "crashed"}
    if result["status"] not in ("passed", "skipped") or out.returncode != 0:
        pytest.fail(f"{rel}: {result}\n--- stdout\n{out.stdout[-4000:]}\n--- stderr\n{out.stderr[-8000:]}",
                    pytrace=False)
    if result["status"] == "skipped":
        pytest.skip(result["reason"])


@pytest.mark.parametrize("path", EXAMPLES, ids=[_rel(p) for p in EXAMPLES])
def test_examples_run(path, tmp_path):
    out = _run([sys.executable, str(path)], tmp_path, _env({}))
    why = skip_reason_of_output(out.stderr) if out.returncode != 0 else None
    if why is not None:
        pytest.skip(f"{_rel(path)}: {why}")
    assert out.returncode == 0, f"{_rel(path)} failed:\n{out.stdout[-4000:]}\n{out.stderr[-8000:]}"


@pytest.mark.parametrize("storage", option_tables.PAGES)
def test_option_tables_match_the_config_dataclasses(storage):
    page = option_tables.page(storage)
    shown = option_tables.in_page(page.read_text(encoding="utf-8"))
    assert shown, f"{_rel(page)} has no options table between the markers of tests/docs/option_tables.py"
    assert shown == option_tables.generated(storage), (
        f"{_rel(page)}: the options table differs from the config dataclass; "
        "run `python tests/docs/option_tables.py --write`")


def test_every_block_is_seen():
    """A fence the parser misreads (an unclosed block swallowing the rest of a page) shows here:
    every ``` line of a page is an opening or a closing one, in pairs."""
    for path in MARKDOWN:
        fences = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.lstrip().startswith("```")]
        assert len(fences) % 2 == 0, f"{_rel(path)}: an unclosed ``` fence"


@pytest.mark.parametrize("path", list(_markdown_params()))
def test_named_files_exist(path):
    """Links and `repository/paths` of a page point at files of the repository (a pattern such as
    `benchmarks/results_*` or `docs/storages/<name>.md` is not a path)."""
    text = path.read_text(encoding="utf-8")
    missing = []
    for m in LINK.finditer(text):
        target = m.group(1).split("#")[0]
        if target and not target.startswith(("http://", "https://", "mailto:")) \
                and not (path.parent / target).exists():
            missing.append(target)
    for m in CODE_PATH.finditer(text):
        target = m.group(1).split(":")[0].rstrip(".,;")
        if not any(c in target for c in "*<>{}") and not (ROOT / target).exists():
            missing.append(target)
    assert not missing, f"{_rel(path)} names files that are not in the repository: {missing}"
