#!/usr/bin/env bash
# The one script a GPU session runs (device time is scarce: one command, a
# few minutes): build what needs a GPU, run the GPU tests (ctest -L gpu, among
# them test_gpu_model: a built-in GPT trained on cuda:0 against the CPU engine),
# the NCCL communicator test on one rank (when MPI is there), bench_cuda_adam
# and bench_cuda_engine, then GPT-2 small training tokens/s and MFU through the
# public C ABI (bench_gpt --device cuda: device-resident bf16 and fp32,
# ZeRO-Offload bf16) and, where python3 has torch with CUDA, the same model in
# PyTorch eager (bench/python/gpt_torch.py --device cuda) for the ratio
# ours/torch; print a summary. Without a GPU everything is built and reported
# as skipped, and the script exits 0 (the dry run CI machines can do). A GPT
# benchmark that runs out of its time share is noted, not failed.
#
#   scripts/gpu_check.sh [extra cmake configure args]
#   scripts/gpu_check.sh --fetch-debs    (on a machine WITH network: see below)
#
# Environment: DS_GPU_CHECK_BUDGET_S (total seconds, default 540, enforced
# with timeout), DS_GPU_BUILD_DIR (default build-gpu), DS_JOBS (default nproc),
# OUT (if set, the log, the summary, the ctest and benchmark output are also
# written there).
#
# Build dependencies on a bare machine: if cJSON / dlpack / GoogleTest headers
# are missing, the .debs in .gpu_debs/ (made by --fetch-debs, on a Debian
# machine with network, then carried along) are unpacked into a private
# prefix; failing that, scripts/install_deps.sh --build-only installs them
# with apt (needs network). NCCL is taken from the CUDA toolkit or, failing
# that, from a pip nvidia-nccl package (PyTorch's).
#
# With this workplace's device tool (15 minutes of device time per session):
# run --fetch-debs in the checkout the tool sends, then one call:
#   run(command="scripts/gpu_check.sh", carry=[".gpu_debs"], timeout_s=600)
# and read summary.txt, bench_cuda_adam.txt, bench_cuda_engine.txt and the
# gpt_*.txt outputs of the GPT benchmarks from the files it brings back.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
debs="$root/.gpu_debs"

# The build deps that unpack into a prefix and work from there (MPI does not:
# the NCCL test then needs the machine's own MPI).
if [ "${1:-}" = "--fetch-debs" ]; then
  mkdir -p "$debs" && cd "$debs" || exit 1
  apt-get download libcjson-dev libcjson1 libdlpack-dev libgtest-dev || exit 1
  ls -l "$debs"; echo "carry .gpu_debs along (it is git-ignored)"
  exit 0
fi

budget="${DS_GPU_CHECK_BUDGET_S:-540}"
build="${DS_GPU_BUILD_DIR:-$root/build-gpu}"
outdir="${OUT:-$build/gpu_check}"

# --- outer: the total budget, the log, the summary ------------------------
if [ "${DS_GPU_CHECK_INNER:-}" != 1 ]; then
  mkdir -p "$outdir" || exit 1
  : >"$outdir/summary.txt"
  DS_GPU_CHECK_INNER=1 DS_GPU_CHECK_T0="$(date +%s)" timeout -k 10 "$budget" bash "$0" "$@" 2>&1 |
    tee "$outdir/gpu_check.log"
  rc=${PIPESTATUS[0]}
  {
    echo
    echo "== gpu_check summary"
    cat "$outdir/summary.txt"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "TIMED OUT: the budget of ${budget} s ran out"; fi
    if [ "$rc" -eq 0 ]; then echo "result: PASS (exit 0)"; else echo "result: FAIL (exit $rc)"; fi
  } | tee -a "$outdir/gpu_check.log" "$outdir/summary.txt.final"
  mv -f "$outdir/summary.txt.final" "$outdir/summary.txt"
  exit "$rc"
fi

# --- inner ----------------------------------------------------------------
t0="${DS_GPU_CHECK_T0}"
jobs="${DS_JOBS:-$(nproc)}"
failed=0
left() { echo $((budget - ($(date +%s) - t0))); }
note() { echo "$*" >>"$outdir/summary.txt"; }
# The smaller of a phase's own cap and what is left minus a reserve for the later phases.
cap() { local l=$(($(left) - $2)); [ "$l" -lt "$1" ] && echo $((l > 10 ? l : 10)) || echo "$1"; }
echo "== gpu_check: budget ${budget} s, build dir $build, -j$jobs, output in $outdir"

# --- the machine ------------------------------------------------------------
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
arch_args=()
if command -v nvidia-smi >/dev/null 2>&1 &&
   gpu="$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)" &&
   [ -n "$gpu" ] && ! echo "$gpu" | grep -qiE "fail|error|not found"; then
  note "gpu: $gpu"
  cc="$(echo "$gpu" | awk -F', ' '{print $2}' | tr -d .)"
  # Only the machine's own architecture: half the nvcc time of the default 80-real;90.
  [[ "$cc" =~ ^[0-9]+$ ]] && arch_args=(-DDS_CUDA_ARCHITECTURES="${cc}-real")
else
  note "gpu: none found (nvidia-smi: ${gpu:-not installed})"
fi
note "host: $(nproc) cores, $(uname -m), $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), nvcc $(nvcc --version 2>/dev/null | grep -oE 'release [0-9.]+' || echo missing), cmake $(cmake --version 2>/dev/null | head -1 | awk '{print $3}')"

# --- build dependencies -----------------------------------------------------
missing_deps() {
  local m=()
  command -v cmake >/dev/null 2>&1 || m+=(cmake)
  command -v c++ >/dev/null 2>&1 || m+=(c++)
  command -v nvcc >/dev/null 2>&1 || m+=(nvcc)
  local h
  for h in cjson/cJSON.h dlpack/dlpack.h gtest/gtest.h; do
    local found=0 d
    for d in /usr/include /usr/local/include ${DS_DEPS_PREFIX:+$DS_DEPS_PREFIX/usr/include}; do
      [ -f "$d/$h" ] && found=1
    done
    [ $found = 1 ] || m+=("$h")
  done
  echo "${m[@]}"
}
cmake_args=()
phase_start=$SECONDS
miss="$(missing_deps)"
# DS_GPU_CHECK_USE_DEBS=1: the carried .debs even where the system has the packages (to try that path).
[ "${DS_GPU_CHECK_USE_DEBS:-0}" = 1 ] && [ -z "$miss" ] && miss="(none; DS_GPU_CHECK_USE_DEBS=1)"
if [ -n "$miss" ] && compgen -G "$debs/*.deb" >/dev/null; then
  # Carried .debs into a private prefix (unpacking into / can break the system).
  export DS_DEPS_PREFIX=/tmp/ds_gpu_deps
  mkdir -p "$DS_DEPS_PREFIX"
  for f in "$debs"/*.deb; do
    if command -v dpkg >/dev/null 2>&1; then dpkg -x "$f" "$DS_DEPS_PREFIX"
    else (cd "$DS_DEPS_PREFIX" && ar p "$f" "$(ar t "$f" | grep '^data.tar')" | tar -xJ); fi ||
      echo "could not unpack $f"
  done
  # cJSON's CMake package names /usr literally: point it at the prefix.
  sed -i "s#\"/usr/#\"$DS_DEPS_PREFIX/usr/#g" "$DS_DEPS_PREFIX"/usr/lib/*/cmake/cJSON/*.cmake 2>/dev/null
  export CMAKE_PREFIX_PATH="$DS_DEPS_PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  libdir="$(echo "$DS_DEPS_PREFIX"/usr/lib/*-linux-gnu)"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  note "deps: $miss missing; unpacked $(ls "$debs"/*.deb | wc -l) carried .debs into $DS_DEPS_PREFIX"
elif [ -n "$miss" ]; then
  echo "== missing: $miss; scripts/install_deps.sh --build-only (apt, needs network)"
  if timeout 5 getent hosts deb.debian.org >/dev/null 2>&1 || timeout 5 getent hosts archive.ubuntu.com >/dev/null 2>&1; then
    timeout "$(cap 300 200)" "$root/scripts/install_deps.sh" --build-only
    note "deps: $miss missing; install_deps.sh --build-only exit $? ($((SECONDS - phase_start)) s)"
  else
    note "deps: $miss missing, no network and no carried .gpu_debs (scripts/gpu_check.sh --fetch-debs)"
  fi
else
  note "deps: present"
fi
miss="$(missing_deps)"
if [ -n "$miss" ]; then
  note "deps: STILL MISSING: $miss"
  exit 1
fi
# pkg-config is looked for (find_package(PkgConfig REQUIRED)) but no pkg_check_modules
# uses it: where it is absent, any program that exits 0 satisfies the check.
command -v pkg-config >/dev/null 2>&1 || cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$(command -v true)")

# NCCL: the CUDA toolkit's, else a pip package's (nvidia-nccl-cu*, which PyTorch brings).
nccl_found=0
for d in /usr/include /usr/local/cuda/include /usr/local/cuda/targets/*/include; do
  [ -f "$d/nccl.h" ] && nccl_found=1
done
if [ $nccl_found = 0 ]; then
  for py in python3 /opt/torch/.venv/bin/python3; do
    d="$("$py" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)" || continue
    lib="$(ls "$d"/lib/libnccl.so* 2>/dev/null | head -1)"
    if [ -f "$d/include/nccl.h" ] && [ -n "$lib" ]; then
      cmake_args+=(-DDS_NCCL_INCLUDE_DIR="$d/include" -DDS_NCCL_LIBRARY="$lib")
      export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      note "nccl: from $d"
      nccl_found=1
      break
    fi
  done
fi
[ $nccl_found = 1 ] || note "nccl: not found in the CUDA toolkit nor a pip package (configure will say)"

# --- configure and build ------------------------------------------------------
echo "== configure"
mkdir -p "$build" || exit 1
phase_start=$SECONDS
if ! timeout "$(cap 180 240)" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDS_WITH_CUDA=ON \
    -DDS_BUILD_BENCH=ON -DDS_BUILD_TESTS=ON -DDS_BUILD_EXAMPLES=OFF "${arch_args[@]}" "${cmake_args[@]}" "$@" \
    >"$build/gpu_check_configure.log" 2>&1; then
  tail -n 40 "$build/gpu_check_configure.log"
  note "configure: FAILED ($((SECONDS - phase_start)) s; $build/gpu_check_configure.log)"
  exit 1
fi
grep -E "deepspeed_c .*CUDA=|GEMM engines" "$build/gpu_check_configure.log"
note "configure: ok ($((SECONDS - phase_start)) s) $(grep -oE 'MPI=[A-Z]+ CUDA=[A-Z]+' "$build/gpu_check_configure.log" | head -1)"

targets=(bench_cuda_adam bench_cuda_engine bench_gpt)
for f in "$root"/tests/gpu/test_*.cpp; do targets+=("gpu_$(basename "$f" .cpp)"); done
for f in "$root"/tests/gpu/test_*.c; do targets+=("gpu_$(basename "$f" .c)"); done
echo "== build: ${targets[*]}"
phase_start=$SECONDS
if ! timeout "$(cap 420 120)" cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/gpu_check_build.log" 2>&1; then
  grep -E "error|Error" "$build/gpu_check_build.log" | head -n 30
  tail -n 20 "$build/gpu_check_build.log"
  note "build: FAILED or out of time ($((SECONDS - phase_start)) s; $build/gpu_check_build.log)"
  exit 1
fi
note "build: ok ($((SECONDS - phase_start)) s, ${#targets[@]} targets)"

# --- GPU tests ------------------------------------------------------------
echo "== ctest -L gpu"
phase_start=$SECONDS
# Verbose: the tests' own lines (errors, timings) stay in ctest_gpu.txt.
(cd "$build" && timeout "$(cap 240 100)" ctest -L gpu -V --timeout 120) >"$outdir/ctest_gpu.txt" 2>&1
ct="$outdir/ctest_gpu.txt"
grep -E "Test +#[0-9]+: |SKIPPED|FAIL" "$ct" | tail -n 60
total=$(grep -oE "tests failed out of [0-9]+" "$ct" | grep -oE "[0-9]+$" | tail -1)
pass=$(grep -cE "Test +#[0-9]+: .* Passed" "$ct")
skip=$(grep -cE "\*\*\*Skipped" "$ct")
if [ -z "$total" ] || [ "$total" -eq 0 ]; then
  note "gpu tests: NO RESULT (ctest found no test or was stopped)"; failed=1
else
  fail=$((total - pass - skip))
  note "gpu tests: $pass passed, $skip skipped, $fail failed of $total (ctest -L gpu, $((SECONDS - phase_start)) s)"
  [ "$fail" -eq 0 ] || failed=1
  # test_gpu_attention's timing of GPT-2 small's attention, cuBLAS vs tiled products.
  grep -oE "GPT-2 small attention.*" "$ct" | sed 's/^/  /' >>"$outdir/summary.txt" || true
fi

# --- the NCCL communicator on one rank (optional: needs MPI) ----------------
if (cmake --build "$build" --target help 2>/dev/null || true) | grep -q "mpi_test_comm_nccl" &&
   command -v mpirun >/dev/null 2>&1; then
  echo "== NCCL communicator test, 1 rank"
  phase_start=$SECONDS
  if timeout "$(cap 120 100)" cmake --build "$build" -j "$jobs" --target mpi_test_comm_nccl >>"$build/gpu_check_build.log" 2>&1; then
    # One GPU, one rank (NCCL refuses two ranks on one device): the tests that
    # mean something on one rank (the mismatch check and the ring need two).
    filter="CommNccl.IsOneRankPerGpu:CommNccl.AllreduceEveryFloatDtypeAndOp:CommNccl.ReduceScatterAllgatherBroadcastAlltoall"
    out="$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 timeout "$(cap 90 80)" \
           mpirun --allow-run-as-root --oversubscribe -np 1 "$build/tests/mpi/mpi_test_comm_nccl" \
           --gtest_filter="$filter" --gtest_color=no 2>&1)"
    rc=$?
    echo "$out"
    summ="$(echo "$out" | grep -E "^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ test" | sed "s/, listed below://" | tr -s ' ' | paste -sd ';' -)"
    note "nccl test (1 rank): exit $rc; ${summ:-no gtest summary} ($((SECONDS - phase_start)) s)"
    [ "$rc" -eq 0 ] || failed=1
  else
    note "nccl test: not built (build failed or out of time; optional)"
  fi
else
  note "nccl test: not built (no MPI here; optional)"
fi

# --- the benchmarks ---------------------------------------------------------
# run_bench NAME SECONDS SUMMARY: bench/NAME within its share of the budget,
# its output in NAME.txt; the lines SUMMARY prints from that file go to the
# summary when it ran.
# RESERVE (default 5): seconds kept back for the phases after it.
run_bench() {
  local name=$1 secs=$2 summary=$3 reserve=${4:-5} b="$outdir/$1.txt" rc start=$SECONDS
  echo "== $name"
  timeout "$(cap "$secs" "$reserve")" "$build/bench/$name" 2>&1 | tee "$b"
  rc=${PIPESTATUS[0]}
  if grep -q "^SKIPPED:" "$b"; then
    note "$name: $(grep "^SKIPPED:" "$b")"
  elif [ "$rc" -eq 0 ]; then
    note "$name: ran ($((SECONDS - start)) s; output in $name.txt):"
    "$summary" "$b" | sed 's/^/  /' >>"$outdir/summary.txt"
  else
    note "$name: FAILED (exit $rc)"; failed=1
  fi
}
adam_summary() { sed -n '/^case /,/^sanity/p' "$1"; grep "worst ratio" "$1"; }
engine_summary() { grep -E "^(resident|zero-offload)" "$1"; }
# Each keeps back time for what follows: ~210 s for the GPT benchmarks below (their shares, squeezed).
run_bench bench_cuda_adam 150 adam_summary 260
run_bench bench_cuda_engine 120 engine_summary 210

# --- GPT-2 small training: ours (public C ABI) and PyTorch eager -------------
# The same shape for both (GPT-2 small, 124M parameters with the padded vocab):
# a few steps each, the median step timed (warmup: cuBLAS, the block cache).
gpt_shape=(--layers 12 --heads 12 --embd 768 --vocab 50304 --batch 8 --seq 1024 --steps 4 --warmup 2)
field() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }
# run_gpt LABEL SECONDS RESERVE ARGS...: bench_gpt --device cuda on the shape
# with ARGS, within its share; output in gpt_LABEL.txt, tokens/s and MFU to the summary.
run_gpt() {
  local label=$1 secs=$2 reserve=$3 b="$outdir/gpt_$1.txt" rc start=$SECONDS r
  shift 3
  echo "== bench_gpt $label: --device cuda ${gpt_shape[*]} $*"
  timeout "$(cap "$secs" "$reserve")" "$build/bench/bench_gpt" --device cuda "${gpt_shape[@]}" "$@" 2>&1 | tee "$b"
  rc=${PIPESTATUS[0]}
  r="$(grep -E "^RESULT ours-[a-z0-9-]+ tokens_per_s=" "$b" | head -1)"
  if grep -q "^SKIPPED:" "$b"; then
    note "bench_gpt $label: $(grep "^SKIPPED:" "$b")"
  elif [ "$rc" -eq 0 ] && [ -n "$r" ]; then
    note "bench_gpt $label: $(field tokens_per_s "$r") tokens/s, step $(field step_ms "$r") ms, MFU $(field mfu "$r") of $(field peak_tflops "$r") TFLOP/s ($((SECONDS - start)) s; gpt_$label.txt)"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    note "bench_gpt $label: out of its time share after $((SECONDS - start)) s (not a failure; gpt_$label.txt)"
  else
    note "bench_gpt $label: FAILED (exit $rc; gpt_$label.txt)"; failed=1
  fi
}
run_gpt bf16 75 150 --precision bf16 --zero 0
run_gpt fp32 75 100 --precision fp32 --zero 0
run_gpt offload-bf16 60 60 --precision bf16 --zero 2 --offload 1

torch_py=""
for py in python3 /opt/torch/.venv/bin/python3; do
  timeout 30 "$py" -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1 && { torch_py=$py; break; }
done
if [ -z "$torch_py" ]; then
  note "torch: not available (no python3 here imports torch with a CUDA device)"
else
  echo "== gpt_torch.py --device cuda (${torch_py})"
  b="$outdir/gpt_torch.txt"
  start=$SECONDS
  timeout "$(cap 90 5)" "$torch_py" "$root/bench/python/gpt_torch.py" --device cuda "${gpt_shape[@]}" \
    --precisions bf16,fp32 2>&1 | tee "$b"
  rc=${PIPESTATUS[0]}
  if grep -q "^SKIPPED:" "$b"; then
    note "torch: $(grep "^SKIPPED:" "$b")"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    note "torch: out of its time share after $((SECONDS - start)) s (gpt_torch.txt)"
  elif [ "$rc" -ne 0 ]; then
    note "torch: gpt_torch.py exit $rc (gpt_torch.txt; not our failure)"
  fi
  for p in bf16 fp32; do
    t="$(field tokens_per_s "$(grep "^RESULT torch-$p " "$b")")"
    [ -n "$t" ] || continue
    o="$(field tokens_per_s "$(grep "^RESULT ours-$p " "$outdir/gpt_$p.txt" 2>/dev/null)")"
    note "torch-$p: $t tokens/s$([ -n "$o" ] && awk -v o="$o" -v t="$t" 'BEGIN { printf "; ours/torch %.2f", o / t }')"
  done
fi
note "elapsed: $(($(date +%s) - t0)) s of ${budget} s"
exit $failed
