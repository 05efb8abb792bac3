#!/usr/bin/env bash
# Fetch karpathy/llm.c at a pinned commit into a cache directory OUTSIDE this
# repository and build its CPU trainer (train_gpt2.c) for the GPT benchmark
# (bench/gpt_compare.sh). Nothing of llm.c is ever committed here.
#
#   bench/llmc/fetch_build.sh            # prints the path of the built binary on its last line
#
# Environment:
#   DS_BENCH_CACHE   cache root (default /tmp/ds-bench); llm.c goes to $DS_BENCH_CACHE/llm.c
#   DS_LLMC_MIRROR   a local git repository (bare or not) holding the pinned commit, used when
#                    github.com cannot be reached (default: /work/.mirror/karpathy+llm.c/repo if present)
#   LLMC_CFLAGS      compiler flags (default: those of llm.c's own Makefile for train_gpt2:
#                    -Ofast -march=native -fopenmp -DOMP; its matmul loops rely on -Ofast to vectorise)
#
# Exit status: 0 built; 3 llm.c could not be fetched (no network and no mirror: the caller skips
# the llm.c column); 1 anything else (a patch anchor not found, the build failed).
#
# The build patches a COPY of train_gpt2.c (train_gpt2_bench.c, in the cache dir) in five places,
# each a one-line substitution checked below; the original is left as fetched:
#   1. a helper llmc_env_int(name, default) is inserted before main();
#   2. `int B = 4;`  -> B from $LLMC_B (default 4);
#   3. `int T = 64;` -> T from $LLMC_T (default 64);
#   4. `step <= 40`  -> the last step from $LLMC_STEPS (default 40);
#   5. the validation-loss pass (every 10 steps) and the sampling pass (every 20) run only when
#      $LLMC_EVAL is non-zero (default 1): they are outside llm.c's per-step timer anyway, but cost
#      minutes of wall time on 2 cores.
# The model, the optimizer, the kernels and the per-step timer ("step N: train loss L (took X ms)",
# forward + zero_grad + backward + update) are untouched. The trainer reads gpt2_124M.bin and
# dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin from its working directory: the
# harness writes random-initialised ones there with bench/llmc/write_checkpoint.py.
set -euo pipefail

LLMC_URL=https://github.com/karpathy/llm.c
LLMC_COMMIT=f1e2ace651495b74ae22d45d1723443fd00ecd3a   # master, May 2025 (PR #801)
CACHE=${DS_BENCH_CACHE:-/tmp/ds-bench}
DIR=$CACHE/llm.c
MIRROR=${DS_LLMC_MIRROR:-}
if [[ -z $MIRROR && -d /work/.mirror/karpathy+llm.c/repo ]]; then MIRROR=/work/.mirror/karpathy+llm.c/repo; fi
CFLAGS=${LLMC_CFLAGS:--Ofast -march=native -fopenmp -DOMP -Wno-unused-result}

have_commit() { [[ -d $DIR/.git ]] && git -C "$DIR" cat-file -e "$LLMC_COMMIT^{commit}" 2>/dev/null; }

mkdir -p "$CACHE"
if ! have_commit; then
    rm -rf "$DIR"
    if timeout 120 git clone --quiet "$LLMC_URL" "$DIR" 2>/dev/null && have_commit; then
        echo "llm.c: cloned $LLMC_URL" >&2
    elif [[ -n $MIRROR ]] && rm -rf "$DIR" && git clone --quiet "$MIRROR" "$DIR" 2>/dev/null && have_commit; then
        echo "llm.c: $LLMC_URL unreachable; cloned the local mirror $MIRROR" >&2
    else
        rm -rf "$DIR"
        echo "llm.c: cannot fetch $LLMC_URL (no network?) and no local mirror with commit $LLMC_COMMIT" \
             "(set DS_LLMC_MIRROR); the llm.c column is skipped" >&2
        exit 3
    fi
fi
git -C "$DIR" -c advice.detachedHead=false checkout --quiet --force "$LLMC_COMMIT"

SRC=$DIR/train_gpt2.c
PATCHED=$DIR/train_gpt2_bench.c
BIN=$DIR/train_gpt2_bench
cp "$SRC" "$PATCHED"

# sub PATTERN REPLACEMENT: replace exactly one line matching the fixed string PATTERN.
sub() {
    local n
    n=$(grep -cF -- "$1" "$PATCHED" || true)
    if [[ $n != 1 ]]; then
        echo "llm.c patch: expected one line containing '$1' in train_gpt2.c, found $n" >&2
        exit 1
    fi
    python3 - "$PATCHED" "$1" "$2" <<'PY'
import sys
path, old, new = sys.argv[1:4]
text = open(path).read()
open(path, "w").write(text.replace(old, new, 1))
PY
}
sub 'int main() {' \
    'static int llmc_env_int(const char* k, int d) { const char* s = getenv(k); return s && *s ? atoi(s) : d; }
int main() {'
sub 'int B = 4;' 'int B = llmc_env_int("LLMC_B", 4);'
sub 'int T = 64;' 'int T = llmc_env_int("LLMC_T", 64);'
sub 'step <= 40;' 'step <= llmc_env_int("LLMC_STEPS", 40);'
sub 'if (step % 10 == 0) {' 'if (llmc_env_int("LLMC_EVAL", 1) && step % 10 == 0) {'
sub 'if (step > 0 && step % 20 == 0) {' 'if (llmc_env_int("LLMC_EVAL", 1) && step > 0 && step % 20 == 0) {'

# Rebuild only when the flags or the patched source changed.
STAMP=$DIR/.bench_build_stamp
WANT="$LLMC_COMMIT $CFLAGS $(sha256sum "$PATCHED" | cut -c1-16)"
if [[ ! -x $BIN || ! -f $STAMP || $(cat "$STAMP") != "$WANT" ]]; then
    # shellcheck disable=SC2086
    (cd "$DIR" && gcc $CFLAGS -o "$BIN" train_gpt2_bench.c -lm) >&2
    echo "$WANT" > "$STAMP"
    echo "llm.c: built $BIN with: gcc $CFLAGS" >&2
fi
echo "$BIN"
