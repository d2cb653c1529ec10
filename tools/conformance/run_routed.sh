#!/usr/bin/env bash
# The routed variant of ../shared/conformance/run_jax_tests.sh (see README.md here): the same settings, with
# this folder's ftrans_shim.py, which also routes jax.scipy/experimental/interpreters imports and jax's config.
# usage: run_routed.sh <jax|ftrans> <test_file.py> [extra pytest args...]
# env: JT_DIR (exported jax tests/ folder, default /tmp/jax-tests/tests), VENV (default /tmp/ext-venv),
#      NPROC (default 2), OUT (results dir), JAX_NUM_GENERATED_CASES (default 10, jtu's default)
set -u
lib=$1; file=$2; shift 2
JT_DIR=${JT_DIR:-/tmp/jax-tests/tests}
VENV=${VENV:-/tmp/ext-venv}
NPROC=${NPROC:-2}
HERE=$(cd "$(dirname "$0")" && pwd); export FTRANS_SHIM_TARGETS=${FTRANS_SHIM_TARGETS:-${file%.py}}
OUT=${OUT:-/tmp/conformance-results}
mkdir -p "$OUT"
case $lib in
  jax) export FTRANS_SHIM=0 ;;
  ftrans) export FTRANS_SHIM=1 ;;
  *) echo "unknown lib $lib"; exit 2 ;;
esac
stem=jt_${lib}_${file%.py}
export FTRANS_SHIM_FALLBACKS=$OUT/${stem}_fallbacks.txt
rm -f "$FTRANS_SHIM_FALLBACKS"
export PYTHONPATH=$HERE
export JAX_NUM_GENERATED_CASES=${JAX_NUM_GENERATED_CASES:-10}
export JAX_PLATFORMS=cpu
cd "$JT_DIR"
start=$(date +%s)
"$VENV/bin/python" -m pytest -c "$HERE/pytest.ini" --rootdir="$JT_DIR" \
  -p ftrans_shim -p no:cacheprovider -n "$NPROC" \
  --json-report --json-report-file="$OUT/${stem}.json" \
  -q --tb=short -rN "$file" "$@" > "$OUT/${stem}.log" 2>&1
rc=$?
end=$(date +%s)
echo "$lib $file rc=$rc wall=$((end-start))s" | tee -a "$OUT/${stem}.log"
tail -2 "$OUT/${stem}.log"
