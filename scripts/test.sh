#!/usr/bin/env bash
# The whole test suite: install dependencies, build, run every test (unit,
# C API, ABI, install), then build with AddressSanitizer + UBSan and run the
# unit and C API tests again, then ThreadSanitizer over the threaded tests
# (DS_SKIP_SANITIZE=1 / DS_SKIP_TSAN=1 skip those). Prints one closing
# "N passed, N failed" line. Each stage's heading says when it started
# (minutes into the run). The sanitizer suite and the differential have fixed
# time budgets (DS_SANITIZE_BUDGET_S, DS_DIFF_BUDGET_S): what they had no time
# for is reported next to the totals as not run, not counted as failed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install_deps.sh"
jobs="${DS_JOBS:-$(nproc)}"

log="$(mktemp -d)"
total_pass=0; total_fail=0
at() { printf '(at %dm%02ds)' $((SECONDS / 60)) $((SECONDS % 60)); }
stage() { echo "== $* $(at)"; }
run_suite() {  # name, build dir, ctest args...
  local name="$1" dir="$2"; shift 2
  stage "$name"
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

# run_suite's counts for a suite with a time budget (seconds): its tests
# (those with a label matching the regex) start in chunks of 64 (-j as above) while the
# budget lasts; the tests of the chunks left when it is spent are counted as
# not run (a note next to the totals), not as failed. A test that started
# always finishes (or meets its own ctest timeout).
suite_not_run=""
# The chunks select tests by number only: ctest 3.25 numbers -I within the
# -L selection when both are given.
run_suite_budgeted() {  # name, build dir, budget in seconds, label regex, more ctest args...
  local name="$1" dir="$2" budget="$3" labels="$4"; shift 4
  stage "$name (budget ${budget} s)"
  local out="$log/$name.txt" start=$SECONDS ids chunk rc line fail all pass=0 failed=0 left=0 n=0
  ids=$(cd "$dir" && ctest -N -L "$labels" | sed -nE 's/^ *Test +#([0-9]+):.*/\1/p')
  local -a all_ids=($ids)
  : >"$out"
  if [ "${#all_ids[@]}" -eq 0 ]; then echo "$name: no tests labelled $labels in $dir"; total_fail=$((total_fail + 1)); return; fi
  for ((i = 0; i < ${#all_ids[@]}; i += 64)); do
    local -a part=("${all_ids[@]:i:64}")
    if [ $((SECONDS - start)) -ge "$budget" ]; then left=$((left + ${#part[@]})); continue; fi
    chunk=$(IFS=,; echo "${part[*]}")
    rc=0
    (cd "$dir" && ctest --output-on-failure -j "$jobs" -I "0,0,0,$chunk" "$@") >"$out.part" 2>&1 || rc=$?
    cat "$out.part" >>"$out"
    line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$out.part" | tail -1 || true)
    if [ -z "$line" ]; then
      tail -n 40 "$out.part"; echo "$name: ctest produced no summary for tests ${part[0]}..${part[-1]} (rc=$rc)"
      failed=$((failed + 1)); continue
    fi
    fail=$(echo "$line" | sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\1/')
    all=$(echo "$line" | sed -E 's/.*tests passed, ([0-9]+) tests failed out of ([0-9]+).*/\2/')
    pass=$((pass + all - fail)); failed=$((failed + fail)); n=$((n + all))
    if [ "$fail" -gt 0 ]; then tail -n 60 "$out.part"; fi
    if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then tail -n 40 "$out.part"; failed=$((failed + 1)); fi
  done
  rm -f "$out.part"
  echo "$name: $pass passed, $failed failed of the $n run in $((SECONDS - start)) s; $left not run (budget ${budget} s)"
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + failed))
  if [ "$left" -gt 0 ]; then suite_not_run="$suite_not_run $name:$left"; fi
}
sanitize_budget="${DS_SANITIZE_BUDGET_S:-900}"

test_python="$("$root/scripts/python_env.sh")"

# The differential's venv (torch + deepspeed, ~5 GB on a machine's first run)
# downloads in the background while the library builds; its time counts
# against the differential's budget (DS_DIFF_BUDGET_S, default 1800 s from
# here), so a slow network cannot hold the whole run past its limit.
diff_budget="${DS_DIFF_BUDGET_S:-1800}"
diff_start=$SECONDS
diff_prep_pid=""
if [ "${DS_SKIP_DEEPSPEED_DIFF:-0}" != "1" ]; then
  setsid "$root/scripts/diff_deepspeed.sh" --prepare >"$log/dsdiff_prepare.txt" 2>&1 &
  diff_prep_pid=$!
  trap 'kill -- -"$diff_prep_pid" 2>/dev/null || true' EXIT
fi

stage "build (Release)"
DS_BUILD_DIR="$root/build" "$root/scripts/build.sh" -DDS_TEST_PYTHON="$test_python"
run_suite release "$root/build"

# The Python package (bindings/python): installed into the test venv the way
# a user installs it (pip builds it with scikit-build-core and bundles the
# library), then its pytest suite (tests/python/pkg).
run_pytest() {
  stage "python package"
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

# The Rust crates (bindings/rust): cargo test --offline (unit tests, doc
# examples, integration tests, 2 ranks under tools/ds-run) and cargo doc with
# the cargo on PATH, then the tests once more with Debian's 1.63 toolchain
# when /usr/bin/cargo is another cargo (the crates promise rust-version 1.63).
# Each "test result:" line's passed/failed counts go into the totals.
run_cargo() {  # label, cargo, rustc, rustdoc ("" = from PATH), "doc" to build the docs too
  local label=$1 cargo=$2 out="$log/cargo-$1.txt" rc=0 counts
  stage "rust crates ($label: $("$cargo" --version 2>&1))"
  local env=(CARGO_TARGET_DIR="$root/build/cargo-$label" DEEPSPEED_C_LIB_DIR="$root/build")
  [ -n "$3" ] && env+=(RUSTC="$3" RUSTDOC="$4")
  (cd "$root/bindings/rust" && env "${env[@]}" "$cargo" test --offline --no-fail-fast) >"$out" 2>&1 || rc=$?
  grep -E "^test result:|SKIPPED|FAILED|panicked" "$out" || true
  counts=$(awk '/^test result:/ {for (i = 1; i < NF; i++) {if ($(i+1) == "passed;") p += $i; if ($(i+1) == "failed;") f += $i}}
                END {print p + 0, f + 0}' "$out")
  set -- "$@" $counts
  if [ "$6" -eq 0 ] && [ "$7" -eq 0 ]; then
    tail -n 40 "$out"; echo "rust ($label): cargo test produced no summary (rc=$rc)"; total_fail=$((total_fail+1)); return
  fi
  total_pass=$((total_pass + $6)); total_fail=$((total_fail + $7))
  if [ "$rc" -ne 0 ] && [ "$7" -eq 0 ]; then tail -n 40 "$out"; total_fail=$((total_fail+1)); fi
  if [ "$5" = doc ]; then
    if (cd "$root/bindings/rust" && env "${env[@]}" "$cargo" doc --offline --no-deps) >"$log/cargo-doc.txt" 2>&1; then
      echo "rust: cargo doc ok"; total_pass=$((total_pass+1))
    else
      tail -n 40 "$log/cargo-doc.txt"; echo "rust: cargo doc failed"; total_fail=$((total_fail+1))
    fi
  fi
}
if command -v cargo >/dev/null 2>&1; then
  run_cargo path "$(command -v cargo)" "" "" doc
  if [ -x /usr/bin/cargo ] && [ "$(command -v cargo)" != /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
    run_cargo debian /usr/bin/cargo /usr/bin/rustc /usr/bin/rustdoc test
  fi
else
  echo "rust: no cargo on PATH (scripts/install_deps.sh installs Debian's)"; total_fail=$((total_fail+1))
fi

# The differential against real DeepSpeed (scripts/diff_deepspeed.sh; its
# torch + deepspeed venv is cached under ~/.cache/deepspeed_c, so only a
# machine's first run downloads them, ~5 GB). Each config DeepSpeed can run
# counts as a test; DS_SKIP_DEEPSPEED_DIFF=1 skips it.
run_deepspeed_diff() {
  stage "differential against DeepSpeed (budget ${diff_budget} s, venv preparation included)"
  local out="$log/dsdiff.txt" rc=0 prep_rc=0
  # Wait for the background preparation, but not past the budget.
  while kill -0 "$diff_prep_pid" 2>/dev/null && [ $((SECONDS - diff_start)) -lt "$diff_budget" ]; do sleep 5; done
  if kill -0 "$diff_prep_pid" 2>/dev/null; then
    kill -- -"$diff_prep_pid" 2>/dev/null || true
    tail -n 5 "$log/dsdiff_prepare.txt"
    echo "deepspeed diff: SKIPPED — installing torch + deepspeed into its venv did not finish within the" \
         "${diff_budget} s budget (a slow download; the next run resumes from pip's cache)"
    diff_skipped=1
    return
  fi
  wait "$diff_prep_pid" || prep_rc=$?
  if [ "$prep_rc" -ne 0 ]; then
    tail -n 30 "$log/dsdiff_prepare.txt"
    echo "deepspeed diff: preparing the venv failed (exit $prep_rc)"; total_fail=$((total_fail+1)); return
  fi
  local left=$((diff_budget - (SECONDS - diff_start)))
  [ "$left" -gt 60 ] || left=60
  rm -f "$root/build/deepspeed_diff/summary.json"
  "$root/scripts/diff_deepspeed.sh" --budget-s "$left" >"$out" 2>&1 || rc=$?
  grep -vE "^\[ *[0-9]+s\]" "$out" | tail -n 45
  local counts
  counts=$("$test_python" - "$root/build/deepspeed_diff/summary.json" <<'PY' 2>/dev/null || true
import json, sys
rows = json.load(open(sys.argv[1]))
ok = sum(r["verdict"] in ("PASS", "DIFFERS-BY-DESIGN") for r in rows)
bad = sum(r["verdict"] not in ("PASS", "DIFFERS-BY-DESIGN", "DS-CANNOT-RUN", "NOT-RUN") for r in rows)
not_run = sum(r["verdict"] == "NOT-RUN" for r in rows)
print(ok, bad, not_run)
PY
)
  if [ -z "$counts" ]; then echo "deepspeed diff: no summary (rc=$rc)"; total_fail=$((total_fail+1)); return; fi
  set -- $counts
  total_pass=$((total_pass + $1)); total_fail=$((total_fail + $2)); diff_not_run=$3
  if [ "$rc" -ne 0 ] && [ "$2" -eq 0 ]; then total_fail=$((total_fail+1)); fi
}
diff_skipped=0; diff_not_run=0
if [ "${DS_SKIP_DEEPSPEED_DIFF:-0}" != "1" ]; then run_deepspeed_diff; fi

# The sanitizer builds: optimised, with line tables only (-g1): the reports
# need file:line, not variables, and full -g made most of their build time
# (and of the 300 MB static library).
san_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
           "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")

if [ "${DS_SKIP_SANITIZE:-0}" != "1" ]; then
  stage "build (address,undefined sanitizers)"
  # Without CUDA: the sanitizers cannot see device code, and no GPU test runs
  # in CI, while nvcc adds its kernels to this build's time (the CUDA host code and
  # its argument checks are tested in the release build). Without the MPI tests,
  # which this run does not include (labels below).
  DS_BUILD_DIR="$root/build-asan" "$root/scripts/build.sh" -DDS_SANITIZE=address,undefined \
    "${san_flags[@]}" -DDS_BUILD_BENCH=OFF -DDS_BUILD_EXAMPLES=OFF -DDS_WITH_CUDA=OFF \
    -DDS_BUILD_MPI_TESTS=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite_budgeted sanitize "$root/build-asan" "$sanitize_budget" "unit|c_api|fuzz|cpp"
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
  stage "build (thread sanitizer, threaded tests only)"
  tsan_targets="c_api_test_threads c_api_test_log_sink unit_device_block_cache"
  cmake -S "$root" -B "$root/build-tsan" "${san_flags[@]}" -DDS_SANITIZE=thread \
    -DDS_BUILD_BENCH=OFF -DDS_BUILD_EXAMPLES=OFF -DDS_WITH_CUDA=OFF >/dev/null
  cmake --build "$root/build-tsan" -j "$jobs" --target $tsan_targets
  OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    run_suite tsan "$root/build-tsan" -L threads --timeout 300
fi

echo
if [ "$diff_skipped" = 1 ]; then
  echo "note: the differential against DeepSpeed was skipped (its venv was not ready within ${diff_budget} s)"
elif [ "$diff_not_run" -gt 0 ]; then
  echo "note: ${diff_not_run} DeepSpeed differential config(s) not run within the ${diff_budget} s budget"
fi
for entry in $suite_not_run; do
  echo "note: ${entry#*:} ${entry%%:*} test(s) not run within the suite's time budget (DS_SANITIZE_BUDGET_S=${sanitize_budget})"
done
if ! command -v julia >/dev/null 2>&1; then
  # The Julia package cannot run here (no Julia in Debian or PyPI): say so next to the totals.
  echo "note: bindings/julia/DeepSpeedC/test/runtests.jl was NOT run (no Julia runtime; ctest julia.runtests skipped); the package was checked statically only (ctest -L julia)"
fi
echo "tests: ${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
