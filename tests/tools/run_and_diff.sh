#!/bin/sh
# usage: run_and_diff.sh EXPECTED_FILE PROGRAM [ARGS...]
# Runs PROGRAM and compares its standard output with EXPECTED_FILE byte for
# byte (diff -u shows the difference and sets the exit status).
set -eu
expected=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" > "$out"
diff -u "$expected" "$out"
