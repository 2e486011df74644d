"""The first hour: what a new user meets on a plain install (issue 31 item 5).

Missing optional libraries are simulated in a child process (tests/hidden_modules.py); the
child speaks the public API only.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hidden_modules import env_without, run_without

QDRANT = """
import hybridsearch as hs
class P(hs.Document):
    v: hs.Vector[2]
try:
    hs.DocumentArray(P, storage="qdrant"{args})
except hs.UnsupportedError as e:
    print(e)
else:
    print("opened")
"""


def test_qdrant_without_qdrant_edge_and_no_url_names_what_the_call_needs(tmp_path):
    out = run_without(tmp_path, ("qdrant_edge",), QDRANT.format(args=""))
    msg = out.stdout.strip()
    assert out.returncode == 0, out.stderr
    assert "qdrant_edge" in msg and 'hybridsearch[qdrant]' in msg, msg
    assert "url=" not in msg.replace("no url=", ""), msg  # no url= was given: do not talk of one


def test_qdrant_with_url_without_qdrant_client_names_the_client(tmp_path):
    out = run_without(tmp_path, ("qdrant_client",), QDRANT.format(args=", url='http://127.0.0.1:9'"))
    msg = out.stdout.strip()
    assert out.returncode == 0, out.stderr
    assert "with url=" in msg and "qdrant_client" in msg and 'hybridsearch[qdrant]' in msg, msg


# the commands the command line runs: (argv, a word its help line must hold)
COMMANDS = [("bench", "benchmark"), ("bench sweep-report", "sweep")]


def _cli(tmp_path, *args, hidden=("matplotlib", "rich", "threadpoolctl")):
    """`python -m hybridsearch ARGS` on an install without the bench extra's libraries."""
    return subprocess.run([sys.executable, "-m", "hybridsearch", *args], cwd=tmp_path,
                          env=env_without(tmp_path, hidden), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_command(tmp_path, flag):
    out = _cli(tmp_path, flag)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for command, word in COMMANDS:
        at = [i for i, ln in enumerate(lines) if ln.strip().startswith(f"hybridsearch {command}")
              and (command != "bench" or "sweep-report" not in ln)]
        assert at, f"{command!r} is not listed:\n{out.stdout}"
        assert word in " ".join(lines[at[0]:at[0] + 2]).lower(), out.stdout


def test_no_or_an_unknown_command_prints_the_commands_and_exits_2(tmp_path):
    for args in ((), ("serve",)):
        out = _cli(tmp_path, *args)
        assert out.returncode == 2 and "sweep-report" in out.stderr, (args, out.stderr)
        if args:
            assert "unknown command 'serve'" in out.stderr


def test_a_command_has_its_own_help(tmp_path):
    out = _cli(tmp_path, "bench", "--help", hidden=())
    assert out.returncode == 0 and "--quick" in out.stdout, out.stderr


ROOT = Path(__file__).resolve().parents[2]


def _extras() -> set:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def test_install_page_lists_every_extra_of_pyproject():
    text = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w-]+)` \|", text, flags=re.M))
    assert listed == _extras(), f"missing: {_extras() - listed}, not an extra: {listed - _extras()}"


def test_readme_keeps_its_two_commands_first():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[2:6] == ["```bash", 'pip install -e ".[bench]" && hybridsearch bench --quick --out bench-out',
                          'pip install -e ".[test]" && python -m pytest -q tests', "```"]
