#!/bin/sh
# Killed-rank test driver: run_killed_rank.sh MODE MPIRUN NP PROGRAM
#   MODE mpirun    Open MPI's default: mpirun tears the job down when a rank dies.
#   MODE recovery  mpirun --enable-recovery lets the survivors live; the library
#                  alone must end them (its timeout, DS_COMM_TIMEOUT_MS).
# Passes when every other rank is gone, with an error, within 30 s of the kill.
set -u
mode=$1
mpirun=$2
np=$3
prog=$4
extra=""
[ "$mode" = recovery ] && extra="--enable-recovery"
log=$(mktemp)
"$mpirun" --allow-run-as-root --oversubscribe --bind-to none $extra -np "$np" "$prog" >"$log" 2>&1
rc=$?
end=$(date +%s.%N)
cat "$log"
fail=0
victim=$((np - 1))
kill_at=$(sed -n "s/^killed_rank: rank $victim kills itself at \([0-9.]*\)$/\1/p" "$log")
if [ -z "$kill_at" ]; then
    echo "FAIL: rank $victim never got to kill itself"
    rm -f "$log"
    exit 1
fi
elapsed=$(awk "BEGIN { printf \"%.2f\", $end - $kill_at }")
echo "killed-rank test ($mode, $np ranks): mpirun exited $rc, $elapsed s after the kill"
awk "BEGIN { exit !($elapsed < 30) }" || { echo "FAIL: the survivors outlived the kill by $elapsed s (limit 30 s)"; fail=1; }
if [ "$mode" = mpirun ]; then
    [ "$rc" -ne 0 ] || { echo "FAIL: mpirun exited 0 although a rank died"; fail=1; }
else
    r=0
    while [ $r -lt $victim ]; do
        grep -Eq "^killed_rank: survivor rank $r failed with status (10|11) " "$log" ||
            { echo "FAIL: survivor rank $r did not fail with DS_ERR_COMM or DS_ERR_TIMEOUT"; fail=1; }
        r=$((r + 1))
    done
fi
rm -f "$log"
exit $fail
