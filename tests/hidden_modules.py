"""Run Python in a child process where some installed modules are missing, as on an install
without their extra: a sitecustomize.py makes the import system refuse them. Every optional
library is installed where the tests run, so this is how a test sees a plain install."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_HIDE = """
import sys

HIDDEN = {hidden!r}

class _Hide:
    # refuses the hidden top-level modules, as an install without them does
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Hide())
"""


def env_without(tmp_path: Path, hidden: tuple) -> dict:
    """An environment for a child process in which the modules `hidden` cannot be imported."""
    hide = Path(tmp_path) / "hide"
    hide.mkdir(exist_ok=True)
    (hide / "sitecustomize.py").write_text(_HIDE.format(hidden=set(hidden)))
    path = os.pathsep.join([str(hide), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path, HS_START_ENGINES="0", PYTHONHASHSEED="0")


def run_without(tmp_path: Path, hidden: tuple, code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """`python -c code` with the modules `hidden` missing."""
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env_without(tmp_path, hidden),
                          capture_output=True, text=True, timeout=timeout)
