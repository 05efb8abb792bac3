#!/usr/bin/env bash
# The whole test suite: install dependencies, build, run every test (unit,
# C API, ABI, install), then build with AddressSanitizer + UBSan and run the
# unit and C API tests again, then ThreadSanitizer over the threaded tests
# (DS_SKIP_SANITIZE=1 / DS_SKIP_TSAN=1 skip those). Prints one closing
# "N passed, N failed" line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
jobs="${DS_JOBS:-$(nproc)}"

log="$(mktemp -d)"
total_pass=0; total_fail=0
run_suite() {  # name, build dir, ctest args...
  local name="$1" dir="$2"; shift 2
  echo "== $name"
  local out="$log/$name.txt" rc=0
  (cd "$dir" && ctest --output-on-failure -j "$jobs" "$@") >"$out" 2>&1 || rc=$?
  tail -n 40 "$out"
  local line pass fail
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$out" | tail -1 || true)
  if [ -z "$line" ]; then echo "$name: ctest produced no summary (rc=$rc)"; total_fail=$((total_fail+1)); return; fi
  fail=$(echo "$line" | sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  all=$(echo "$line" | sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2/')
  pass=$((all - fail))
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail))
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then total_fail=$((total_fail+1)); fi
}

test_python="$("$root/scripts/python_env.sh")"

echo "== build (Release)"
DS_BUILD_DIR="$root/build" "$root/scripts/build.sh" -DDS_TEST_PYTHON="$test_python"
run_suite release "$root/build"

# The Python package (bindings/python): installed into the test venv the way
# a user installs it (pip builds it with scikit-build-core and bundles the
# library), then its pytest suite (tests/python/pkg).
run_pytest() {
  echo "== python package"
  local out="$log/python.txt" rc=0
  if ! "$test_python" -m pip install -q --disable-pip-version-check "$root/bindings/python" >"$log/pip.txt" 2>&1; then
    tail -n 40 "$log/pip.txt"; echo "python: pip install ./bindings/python failed"
    total_fail=$((total_fail+1)); return
  fi
  (cd "$root" && DS_BUILD_DIR="$root/build" "$test_python" -m pytest -q -p no:cacheprovider \
     -o faulthandler_timeout=600 tests/python/pkg) >"$out" 2>&1 || rc=$?
  tail -n 40 "$out"
  local line pass fail err
  line=$(grep -E "[0-9]+ (passed|failed|errors?).* in [0-9.]+s" "$out" | tail -1 || true)
  if [ -z "$line" ]; then echo "python: pytest produced no summary (rc=$rc)"; total_fail=$((total_fail+1)); return; fi
  pass=$(echo "$line" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" || echo 0)
  fail=$(echo "$line" | grep -oE "[0-9]+ failed" | grep -oE "[0-9]+" || echo 0)
  err=$(echo "$line" | grep -oE "[0-9]+ errors?" | grep -oE "[0-9]+" || echo 0)
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + fail + err))
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ] && [ "$err" -eq 0 ]; then total_fail=$((total_fail+1)); fi
}
run_pytest

# The differential against real DeepSpeed (scripts/diff_deepspeed.sh; its
# torch + deepspeed venv is cached under ~/.cache/deepspeed_c, so only a
# machine's first run downloads them, ~5 GB). Each config DeepSpeed can run
# counts as a test; DS_SKIP_DEEPSPEED_DIFF=1 skips it.
run_deepspeed_diff() {
  echo "== differential against DeepSpeed"
  local out="$log/dsdiff.txt" rc=0
  rm -f "$root/build/deepspeed_diff/summary.json"
  "$root/scripts/diff_deepspeed.sh" >"$out" 2>&1 || rc=$?
  grep -vE "^\[ *[0-9]+s\]" "$out" | tail -n 45
  local counts
  counts=$("$test_python" - "$root/build/deepspeed_diff/summary.json" <<'PY' 2>/dev/null || true
import json, sys
rows = json.load(open(sys.argv[1]))
ok = sum(r["verdict"] in ("PASS", "DIFFERS-BY-DESIGN") for r in rows)
bad = sum(r["verdict"] not in ("PASS", "DIFFERS-BY-DESIGN", "DS-CANNOT-RUN") for r in rows)
print(ok, bad)
PY
)
  if [ -z "$counts" ]; then echo "deepspeed diff: no summary (rc=$rc)"; total_fail=$((total_fail+1)); return; fi
  set -- $counts
  total_pass=$((total_pass + $1)); total_fail=$((total_fail + $2))
  if [ "$rc" -ne 0 ] && [ "$2" -eq 0 ]; then total_fail=$((total_fail+1)); fi
}
if [ "${DS_SKIP_DEEPSPEED_DIFF:-0}" != "1" ]; then run_deepspeed_diff; fi

if [ "${DS_SKIP_SANITIZE:-0}" != "1" ]; then
  echo "== build (address,undefined sanitizers)"
  DS_BUILD_DIR="$root/build-asan" "$root/scripts/build.sh" -DDS_SANITIZE=address,undefined \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_BUILD_BENCH=OFF -DDS_BUILD_EXAMPLES=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite sanitize "$root/build-asan" -L "unit|c_api|fuzz|cpp"
fi

if [ "${DS_SKIP_TSAN:-0}" != "1" ]; then
  # ThreadSanitizer over the tests labelled "threads" (tests/CMakeLists.txt):
  # only the library and those tests are built, to keep the added time small
  # (keep tsan_targets in step with that label). OpenMP: libgomp is not built
  # with TSan, so its barriers and thread pool look like races (false
  # positives: e.g. an Adam kernel's read in a libgomp worker against the next
  # ds_step's memset on another thread, ordered by a gomp barrier TSan cannot
  # see); these tests exercise the library's own threading, so the run uses
  # OMP_NUM_THREADS=1 instead of suppressions. Each test gets 300 s.
  echo "== build (thread sanitizer, threaded tests only)"
  tsan_targets="c_api_test_threads c_api_test_log_sink"
  cmake -S "$root" -B "$root/build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDS_SANITIZE=thread \
    -DDS_BUILD_BENCH=OFF -DDS_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$root/build-tsan" -j "$jobs" --target $tsan_targets
  OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    run_suite tsan "$root/build-tsan" -L threads --timeout 300
fi

echo
echo "tests: ${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
