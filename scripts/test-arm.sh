#!/usr/bin/env bash
# The C kernels without Python: tests/native/test_kernels_native.c checks every SIMD level the
# CPU has (scalar, avx2, avx512 on x86-64; scalar, neon on AArch64) against naive references.
#
#   scripts/test-arm.sh native   build with gcc and run here
#   scripts/test-arm.sh arm      cross-compile for AArch64 (aarch64-linux-gnu-gcc -static), run it
#                                under qemu-aarch64 (its default "max" CPU, then a plain ARMv8.0
#                                Cortex-A53); every kernels/*.c is compiled for AArch64 with
#                                setup.py's flags and linked into one shared object that must
#                                have no undefined symbol (so nothing x86-only slips in)
#   scripts/test-arm.sh          both (arm only when its tools are installed)
#
# The AArch64 tools are Debian's gcc-aarch64-linux-gnu and qemu-user. qemu only proves the NEON
# code correct: its speed says nothing about a real ARM CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
PY=${PYTHON:-$(command -v python3 || command -v python)}
SRC="kernels/hs_distance.c kernels/hs_exact.c kernels/hs_topk.c kernels/hs_bitset.c kernels/hs_filter.c
     kernels/hs_lexicon.c kernels/hs_hash.c"
TEST=tests/native/test_kernels_native.c
# setup.py's COMPILE_ARGS (read, not imported: importing setup.py would run setup())
read -r -a FLAGS <<<"$("$PY" - <<'EOF'
import ast
for node in ast.parse(open("setup.py").read()).body:
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILE_ARGS":
        print(" ".join(ast.literal_eval(node.value)))
EOF
)"
[ "${#FLAGS[@]}" -gt 0 ] || { echo "test-arm.sh: no COMPILE_ARGS found in setup.py" >&2; exit 2; }
# warnings that hide a missing intrinsic or builtin on one architecture are errors here
WARN=(-Wall -Wno-unused-function -Wno-unused-parameter -Werror=implicit-function-declaration
      -Werror=int-conversion -Werror=incompatible-pointer-types)
out=$(mktemp -d "${TMPDIR:-/tmp}/hs-native.XXXXXX")
trap 'rm -rf "$out"' EXIT

run_native() {
  echo "== native ($(uname -m), gcc ${FLAGS[*]})"
  gcc "${FLAGS[@]}" "${WARN[@]}" -pthread -Ikernels "$TEST" $SRC -lm -o "$out/test-native"
  "$out/test-native"
}

run_arm() {
  local cc=aarch64-linux-gnu-gcc missing=""
  command -v "$cc" >/dev/null || missing="$missing $cc"
  command -v qemu-aarch64 >/dev/null || missing="$missing qemu-aarch64"
  if [ -n "$missing" ]; then
    echo "test-arm.sh: not on PATH:$missing (Debian: apt-get install gcc-aarch64-linux-gnu qemu-user)" >&2
    return 3
  fi
  echo "== aarch64 objects ($cc ${FLAGS[*]} -fPIC, every kernels/*.c, linked with --no-undefined)"
  local objs=() pids=() f p
  for f in kernels/*.c; do  # in parallel: the compiles are most of this step's time
    "$cc" "${FLAGS[@]}" "${WARN[@]}" -pthread -fPIC -Ikernels -c "$f" -o "$out/$(basename "$f" .c).o" &
    pids+=($!)
    objs+=("$out/$(basename "$f" .c).o")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  "$cc" -shared -pthread "${objs[@]}" -lm -Wl,--no-undefined -o "$out/libhs_kernels_aarch64.so"
  echo "   ${#objs[@]} files compiled and linked"
  echo "== aarch64 test (the objects above + the test, linked -static, under qemu-aarch64)"
  "$cc" "${FLAGS[@]}" "${WARN[@]}" -pthread -Ikernels -c "$TEST" -o "$out/test.o"
  local used=()
  for f in $SRC; do used+=("$out/$(basename "$f" .c).o"); done
  "$cc" -static -pthread "$out/test.o" "${used[@]}" -lm -o "$out/test-aarch64"
  qemu-aarch64 "$out/test-aarch64"
  echo "== the same under qemu-aarch64 -cpu cortex-a53 (ARMv8.0: no dotprod, no SVE)"
  qemu-aarch64 -cpu cortex-a53 "$out/test-aarch64" 0x5eed
}

case "$mode" in
  native) run_native ;;
  arm) run_arm ;;
  all)
    run_native
    if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null; then run_arm
    else echo "== aarch64 skipped: aarch64-linux-gnu-gcc or qemu-aarch64 is not on PATH"; fi ;;
  *) echo "usage: $0 [native|arm|all]" >&2; exit 2 ;;
esac
