"""The C kernels without Python, by scripts/test-arm.sh: here (gcc), and cross-compiled for AArch64
and run under qemu-aarch64 (its NEON kernels), each level against tests/native/test_kernels_native.c's
naive references."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

# internal: which SIMD levels the extension itself dispatches to here, for the native run to match
from hybridsearch._native import _kernels as K

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test-arm.sh"
ARM_TOOLS = ("aarch64-linux-gnu-gcc", "qemu-aarch64")


def run(mode):
    p = subprocess.run(["bash", str(SCRIPT), mode], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"scripts/test-arm.sh {mode} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def passed_levels(out):
    return re.findall(r"^  (\w+) +\d+ checks passed$", out, re.M)


def test_native_kernels_here():
    out = run("native")
    # the C test ran every level the extension can use on this CPU, and no other
    assert passed_levels(out) == list(K.simd_levels()), out
    assert re.search(rf"^ok: {len(K.simd_levels())} levels$", out, re.M), out


def test_native_kernels_on_aarch64_under_qemu():
    missing = [tool for tool in ARM_TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH (Debian: apt-get install gcc-aarch64-linux-gnu qemu-user)")
    out = run("arm")
    assert "files compiled and linked" in out, out
    # two runs (qemu's default CPU, then a Cortex-A53), each at scalar and NEON
    assert passed_levels(out) == ["scalar", "neon"] * 2, out
    assert out.count("arch aarch64, best level neon") == 2, out
