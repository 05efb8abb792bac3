#!/bin/sh
# Per-call overhead of step() from Rust against a no-op C call and against
# ds_backward + ds_step called directly from C, on one tiny engine each,
# interleaved 3 times in one run (docs/PERFORMANCE.md, "Rust crates").
#   bindings/rust/bench.sh [ITERATIONS]     (after building the library in build/)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib=${DEEPSPEED_C_LIB_DIR:-$root/build}
target=${CARGO_TARGET_DIR:-$here/target}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -O2 -std=c99 -Wall -Wextra -I"$root/include" "$here/bench/step_c.c" -o "$out/step_c" \
   -L"$lib" -ldeepspeed_c -Wl,-rpath,"$lib"
(cd "$here" && DEEPSPEED_C_LIB_DIR="$lib" cargo build --offline --release -q --example bench_step)
for round in 1 2 3; do
    echo "-- round $round"
    "$out/step_c" "${1:-200000}"
    # the CPU model, ISA and library build line once
    if [ "$round" = 1 ]; then skip='^$'; else skip='^(cpu|library|iterations):'; fi
    "$target/release/examples/bench_step" "${1:-200000}" | grep -Ev "$skip"
done
