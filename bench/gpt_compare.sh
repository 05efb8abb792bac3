#!/usr/bin/env bash
# GPT training tokens/s (forward + backward + optimizer step) on the same model, same batch,
# same threads: ours (build/bench/bench_gpt, public C ABI), llm.c's CPU trainer (train_gpt2.c,
# fetched and built outside the repo by bench/llmc/fetch_build.sh, random-initialised checkpoint
# from bench/llmc/write_checkpoint.py) and PyTorch eager (bench/python/gpt_torch.py, fp32 and bf16
# autocast). The programs run interleaved, ROUNDS times, the order rotating each round; each
# program's figure is the median of its per-round medians. Also runs bench_gpt_matmul once (the
# step's matrix products through our kernels vs raw oneDNN) for the matmul share and efficiency.
#
#   bench/gpt_compare.sh                       # defaults below; override with environment variables:
#   LAYERS=6 HEADS=6 EMBD=384 VOCAB=8192 BATCH=8 SEQ=128 THREADS=2 ROUNDS=3 \
#   STEPS=4 LLMC_STEPS=3 BUILD=build PRECISIONS="fp32 bf16" PERF=0 bench/gpt_compare.sh
#
# The environment passes through to all programs: on a shared, loaded machine OMP_WAIT_POLICY=passive
# (OpenMP threads sleep at barriers instead of spinning) changes every figure; say which was used.
# TORCH2_PYTHON=/path/to/python adds a column for another PyTorch (e.g. a venv with torch 2.x,
# which has scaled_dot_product_attention; the script uses it there).
# PERF=1 also records one run of ours under `perf record` and prints the share of samples in
# oneDNN code (libdnnl and the kernels it JIT-compiles: the measured matmul share of the real run,
# setup included) and the top symbols; libgomp's share is OpenMP threads waiting at barriers.
# Targets (issue 11 item 7): ours >= 3x llm.c, >= 1.2x PyTorch eager, matmuls >= 70% of oneDNN's
# peak on the same shapes, peak memory within 10% of params + grads + optimizer state + activations.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
LAYERS=${LAYERS:-6} HEADS=${HEADS:-6} EMBD=${EMBD:-384} VOCAB=${VOCAB:-8192}
BATCH=${BATCH:-8} SEQ=${SEQ:-128} THREADS=${THREADS:-2} ROUNDS=${ROUNDS:-3}
STEPS=${STEPS:-4} LLMC_STEPS=${LLMC_STEPS:-3} PRECISIONS=${PRECISIONS:-fp32 bf16} PERF=${PERF:-0}
BUILD=${BUILD:-$ROOT/build}
PY=${PYTHON:-/usr/bin/python3}
CACHE=${DS_BENCH_CACHE:-/tmp/ds-bench}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS OMP_PROC_BIND=${OMP_PROC_BIND:-close}
TOKENS=$((BATCH * SEQ))
SHAPE=(--layers "$LAYERS" --heads "$HEADS" --embd "$EMBD" --vocab "$VOCAB" --batch "$BATCH" --seq "$SEQ")
LOG=$CACHE/gpt_compare.$(date +%Y%m%d-%H%M%S).log
mkdir -p "$CACHE"

BENCH_GPT=$BUILD/bench/bench_gpt
BENCH_MM=$BUILD/bench/bench_gpt_matmul
if [[ ! -x $BENCH_GPT ]]; then
    echo "gpt_compare: $BENCH_GPT not built (cmake -DDS_BUILD_BENCH=ON, target bench_gpt)" >&2
    exit 2
fi

echo "== machine"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|L2|L3)' | sed 's/  */ /g'
echo "cpu: $(grep -m1 -E '^cpu family' /proc/cpuinfo | sed 's/.*: /family /'), $(grep -m1 -E '^model\s' /proc/cpuinfo | sed 's/.*: /model /'), $(grep -m1 -E '^stepping' /proc/cpuinfo | sed 's/.*: /stepping /')"
echo "isa: $(grep -m1 -o -w -E 'avx2|avx512f|avx512_bf16|avx512_fp16|amx_tile|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-(default)} OMP_PROC_BIND=$OMP_PROC_BIND"
echo "threads=$THREADS, load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: GPT L=$LAYERS C=$EMBD NH=$HEADS V=$VOCAB, B=$BATCH T=$SEQ ($TOKENS tokens/step), rounds=$ROUNDS"
echo "log: $LOG"

# ---- llm.c (skipped when it cannot be fetched) ----
LLMC_BIN=
if LLMC_BIN=$("$HERE/llmc/fetch_build.sh" 2>>"$LOG" | tail -1) && [[ -x $LLMC_BIN ]]; then
    RUN_DIR=$CACHE/run-L$LAYERS-C$EMBD-H$HEADS-V$VOCAB-T$SEQ
    if [[ ! -f $RUN_DIR/gpt2_124M.bin ]]; then
        "$PY" "$HERE/llmc/write_checkpoint.py" "$RUN_DIR" --vocab "$VOCAB" --block "$SEQ" --layers "$LAYERS" \
            --heads "$HEADS" --embd "$EMBD" --tokens $((TOKENS * 20 + 1)) >>"$LOG" || LLMC_BIN=
    fi
    echo "llm.c: $LLMC_BIN (commit, gcc flags, source hash: $(cat "$(dirname "$LLMC_BIN")/.bench_build_stamp"))"
else
    LLMC_BIN=
    echo "llm.c: not available (see $LOG); its column is skipped"
fi

declare -A MEM
declare -A R   # R[name]="per-round medians (tokens/s)"
add() { R[$1]="${R[$1]:-} $2"; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
field() { sed -n "s/.*$1=\([0-9.eE+-]*\).*/\1/p" | head -1; }

run_ours() {  # $1 precision
    local out
    out=$("$BENCH_GPT" "${SHAPE[@]}" --steps "$STEPS" --warmup 1 --precision "$1" 2>&1) || {
        echo "ours-$1 failed: $(echo "$out" | tail -3)"; echo "$out" >>"$LOG"; return; }
    echo "$out" >>"$LOG"
    local tps; tps=$(echo "$out" | grep "^RESULT ours-$1 " | field tokens_per_s)
    add "ours-$1" "$tps"
    add "ours-$1-step_ms" "$(echo "$out" | grep "^RESULT ours-$1 " | field step_ms)"
    echo "  ours-$1: $tps tok/s ($(echo "$out" | grep "^RESULT ours-$1 " | sed 's/.*step_ms/step_ms/'))"
    MEM[$1]=$(echo "$out" | grep '^MEMORY')
}
run_llmc() {
    [[ -n $LLMC_BIN ]] || return
    local out ms
    out=$(cd "$RUN_DIR" && LLMC_B=$BATCH LLMC_T=$SEQ LLMC_STEPS=$LLMC_STEPS LLMC_EVAL=0 "$LLMC_BIN" 2>&1)
    echo "$out" >>"$LOG"
    # step 0 allocates gradients, activations and optimizer state lazily: not timed here
    ms=$(echo "$out" | sed -n 's/^step \([0-9]*\): .*took \([0-9.]*\) ms.*/\1 \2/p' | awk '$1 > 0 {print $2}' | median)
    if [[ $ms == nan ]]; then echo "  llm.c failed: $(echo "$out" | tail -3)"; return; fi
    local tps; tps=$(awk -v t="$TOKENS" -v ms="$ms" 'BEGIN {printf "%.1f", t / ms * 1000}')
    add llmc "$tps"
    echo "  llm.c: $tps tok/s (step_ms=$ms, median of steps 1..$LLMC_STEPS)"
}
run_torch() {  # [$1 python, $2 label prefix]
    local out p py=${1:-$PY} pre=${2:-torch}
    out=$("$py" "$HERE/python/gpt_torch.py" "${SHAPE[@]}" --threads "$THREADS" --steps "$STEPS" --warmup 1 \
          --precisions "$(echo $PRECISIONS | tr ' ' ',')" 2>&1)
    echo "$out" >>"$LOG"
    for p in $PRECISIONS; do
        local tps; tps=$(echo "$out" | grep "^RESULT torch-$p " | field tokens_per_s)
        [[ -n $tps ]] || { echo "  $pre-$p failed: $(echo "$out" | tail -3)"; continue; }
        add "$pre-$p" "$tps"
        echo "  $pre-$p: $tps tok/s ($(echo "$out" | head -1 | cut -d, -f1); $(echo "$out" | grep "^RESULT torch-$p " | sed 's/.*step_ms/step_ms/'))"
    done
}
run_ours_all() { local p; for p in $PRECISIONS; do run_ours "$p"; done; }

run_torch2() { run_torch "$TORCH2_PYTHON" torch2; }
PROGS=(run_ours_all run_llmc run_torch)
[[ -n ${TORCH2_PYTHON:-} ]] && PROGS+=(run_torch2)
for ((r = 0; r < ROUNDS; r++)); do
    echo "== round $((r + 1)) (load $(cut -d' ' -f1 /proc/loadavg))"
    for ((i = 0; i < ${#PROGS[@]}; i++)); do "${PROGS[$(((i + r) % ${#PROGS[@]}))]}"; done
done

MM_LINE=
if [[ -x $BENCH_MM ]]; then
    echo "== matrix products of one step: ours vs raw oneDNN (packed weights), same shapes"
    MM_OUT=$("$BENCH_MM" "${SHAPE[@]}" 2>&1); echo "$MM_OUT" >>"$LOG"; echo "$MM_OUT"
    MM_LINE=$(echo "$MM_OUT" | grep '^RESULT matmul')
else
    echo "== $BENCH_MM not built: no matmul figures"
fi

PERF_SHARE=
if [[ $PERF == 1 ]] && command -v perf >/dev/null; then
    echo "== perf: where one run of ours (fp32) spends its samples (whole process, warm-up and setup included)"
    PD=$CACHE/perf.gpt.data
    perf record -q -F 499 -o "$PD" -- "$BENCH_GPT" "${SHAPE[@]}" --steps "$STEPS" --warmup 1 >>"$LOG" 2>&1
    perf report -i "$PD" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
    perf report -i "$PD" --no-children --sort dso,sym --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -20
    PERF_SHARE=$(perf report -i "$PD" --no-children --sort dso --stdio 2>/dev/null | awk '/libdnnl|\[JIT\]/ {gsub("%", "", $1); s += $1} END {print s + 0}')
fi

echo "== summary (median of $ROUNDS per-round medians; tokens/s, higher is better)"
for k in ours-fp32 ours-bf16 llmc torch-fp32 torch-bf16 torch2-fp32 torch2-bf16; do
    [[ -n ${R[$k]:-} ]] && printf "  %-11s %10s tok/s   rounds:%s\n" "$k" "$(echo "${R[$k]}" | median)" "${R[$k]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2f", a / b}'; }
verdict() { awk -v x="$1" -v t="$2" 'BEGIN {if (x == "n/a") print "n/a"; else print (x >= t ? "MEETS" : "MISSES")}'; }
O32=$(echo "${R[ours-fp32]:-}" | median)
OBF=$(echo "${R[ours-bf16]:-}" | median)
L=$(echo "${R[llmc]:-}" | median)
T32=$(echo "${R[torch-fp32]:-}" | median)
TBF=$(echo "${R[torch-bf16]:-}" | median)
x=$(ratio "$O32" "$L");   echo "  ours fp32 / llm.c      = $x  (target >= 3: $(verdict "$x" 3))"
x=$(ratio "$O32" "$T32"); echo "  ours fp32 / torch fp32 = $x  (target >= 1.2: $(verdict "$x" 1.2))"
x=$(ratio "$OBF" "$TBF"); echo "  ours bf16 / torch bf16 = $x  (target >= 1.2: $(verdict "$x" 1.2))"
BEST_T=$(awk -v a="$T32" -v b="$TBF" 'BEGIN {if (b == "nan" || b == "") print a; else if (a == "nan" || a == "") print b; else print (a > b ? a : b)}')
x=$(ratio "$O32" "$BEST_T"); echo "  ours fp32 / best torch = $x"
if [[ -n ${TORCH2_PYTHON:-} ]]; then
    x=$(ratio "$O32" "$(echo "${R[torch2-fp32]:-}" | median)"); echo "  ours fp32 / torch2 fp32 = $x (extra column, $TORCH2_PYTHON)"
    x=$(ratio "$OBF" "$(echo "${R[torch2-bf16]:-}" | median)"); echo "  ours bf16 / torch2 bf16 = $x"
fi
if [[ -n $MM_LINE ]]; then
    OMS=$(echo "$MM_LINE" | field ours_ms_per_step); EFF=$(echo "$MM_LINE" | field ours_over_peak)
    SMS=$(echo "${R[ours-fp32-step_ms]:-}" | median)
    echo "  matmuls: ${OMS} ms of a ${SMS} ms step (share $(ratio "$OMS" "$SMS"), timed standalone);" \
         "at $EFF of oneDNN's peak on the same shapes (target >= 0.70: $(verdict "$EFF" 0.70))"
fi
[[ -n $PERF_SHARE ]] && echo "  matmuls in the real run (perf samples in oneDNN: libdnnl + its [JIT] kernels): ${PERF_SHARE}%"
for p in $PRECISIONS; do
    [[ -n ${MEM[$p]:-} ]] && { echo "  memory, ours $p (last round):"; echo "${MEM[$p]}" | sed 's/^/    /'; }
done
echo "  load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
