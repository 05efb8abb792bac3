#!/bin/bash
# Interleaved before/after runs of the kernel and ds_step benchmarks, for a
# change that must not cost speed (a refactor). Put the two builds' bench
# binaries in ./before/ and ./after/ (bench_adam, bench_step), run this in
# that folder, then summarise: python3 ab_summarize.py ab.log
# The "ratio" columns are each program's own same-run reference (bench_adam:
# the Adam-shaped ceiling loop; bench_step: the bare kernel), which cancels
# the machine's drift between runs; compare those, not raw milliseconds.
set -e
export OMP_NUM_THREADS=2 OMP_PROC_BIND=close
grep -m1 'model name' /proc/cpuinfo
for round in 1 2 3 4 5 6 7 8; do
  for v in before after; do
    echo "=== round $round $v bench_adam"; ./$v/bench_adam 100000000 7
    echo "=== round $round $v bench_step"; ./$v/bench_step 100000000 5
  done
done
