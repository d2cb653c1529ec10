#!/bin/bash
# One prepared run on a GPU machine: the environment, the differential smoke check, the test suite
# and the benchmarks, each under its own time limit so a lent machine's short lease is not spent
# waiting on one part.  Run from the repository root; results go under $OUT (or ./gpu-out).
#
#   SUITE_S=240 BENCH_S=40 bash benchmarks/gpu_session.sh
#   SUITE_ARGS="tests/test_linalg.py" PARTS="smoke suite" bash benchmarks/gpu_session.sh
#
# PARTS picks the parts (env smoke suite bench); SUITE_ARGS the tests; BENCHES the benchmark scripts.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
PY=${PY:-python3}
PARTS=${PARTS:-env smoke suite bench}
SUITE_S=${SUITE_S:-240}
SUITE_ARGS=${SUITE_ARGS:-tests}
WORKERS=${WORKERS:-16}
BENCH_S=${BENCH_S:-45}
BENCHES=${BENCHES:-"jit ad cnn control_flow vmap eager optimizer linalg"}
has() { [[ " $PARTS " == *" $1 "* ]]; }

if has env; then
  { date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
    $PY -c "import sys, jax, jaxlib, numpy; print(sys.version); print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__); print(jax.devices())"
  } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi

if has smoke; then
  echo "== smoke"
  JAX_PLATFORMS=${SMOKE_PLATFORMS:-cuda,cpu} timeout -k 5 "${SMOKE_S:-120}" $PY benchmarks/gpu_smoke.py > "$OUT/smoke.txt" 2>&1
  echo "smoke rc=$?"; grep -v "^PASS" "$OUT/smoke.txt" | cut -c1-400
fi

if has suite; then
  echo "== suite ($SUITE_ARGS, ${SUITE_S}s)"
  : > "$OUT/failures.txt"
  start=$(date +%s)
  # cuda first: jax's and ftrans's default device is the GPU; the host platform stays available
  # for the tests that ask for CPU devices by name.  Autotuning off: compile time, not run time,
  # bounds the suite, and results do not depend on the algorithm XLA picks.
  # pytest runs in its own process group, so the time limit stops its xdist workers too (they would
  # otherwise hold the GPU through the benchmarks).
  JAX_PLATFORMS=${SUITE_PLATFORMS:-cuda,cpu} FTRANS_FAILURE_LOG="$OUT/failures.txt" \
  XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_autotune_level=0" \
    setsid $PY -m pytest -p no:cacheprovider -p _pytest_failure_log -n "$WORKERS" \
      -v --timeout=120 -rfE --tb=short --durations=15 $SUITE_ARGS > "$OUT/suite.log" 2>&1 &
  pid=$!
  ( sleep "$SUITE_S"; kill -TERM -- "-$pid" 2>/dev/null; sleep 5; kill -KILL -- "-$pid" 2>/dev/null ) &
  watchdog=$!
  wait "$pid"
  rc=$?
  kill "$watchdog" 2>/dev/null
  kill -KILL -- "-$pid" 2>/dev/null
  sleep 1
  echo "suite rc=$rc in $(( $(date +%s) - start ))s"
  grep -c " PASSED " "$OUT/suite.log" | sed 's/^/passed: /'
  grep -c " FAILED \| ERROR " "$OUT/suite.log" | sed 's/^/failed or errored: /'
  grep -c " SKIPPED " "$OUT/suite.log" | sed 's/^/skipped: /'
  tail -3 "$OUT/suite.log"
  grep "^=====" "$OUT/failures.txt" | sed 's/^===== //' | sort | uniq | head -150
fi

if has bench; then
  echo "== benchmarks"
  : > "$OUT/bench.txt"
  for b in $BENCHES; do
    echo "### $b" >> "$OUT/bench.txt"
    JAX_PLATFORMS=${BENCH_PLATFORMS:-cuda} timeout -k 5 "$BENCH_S" $PY "benchmarks/$b.py" --quick >> "$OUT/bench.txt" 2>&1
    echo "### $b rc=$?" >> "$OUT/bench.txt"
  done
  grep "###" "$OUT/bench.txt"
fi
