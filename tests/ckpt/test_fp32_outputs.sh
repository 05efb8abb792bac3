#!/usr/bin/env bash
# ds-to-fp32 must not destroy its input nor replace special files
# (issue 8, "Tools that destroy their input"): OUTPUT = a file of the
# checkpoint read (model.safetensors, manifest.json, latest, an optimizer
# file, a link to one), any path inside the tag directory, a FIFO or a
# device is refused with "ds-to-fp32: error: ..." and exit status 2, and
# the checkpoint still converts afterwards. Every run is bounded by timeout.
#   test_fp32_outputs.sh RESUME_DRIVER DS_TO_FP32
set -u
driver="$1"; tool="$2"
dir=$(mktemp -d /tmp/ds_fp32_out_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
"$driver" fp32 save 2 "$dir/ck" >/dev/null || { echo "cannot make a checkpoint"; exit 1; }
tag=$(cat "$dir/ck/latest")
snapshot() { (cd "$dir/ck" && find . -type f -o -type p | sort | xargs -r md5sum); }
before=$(snapshot)

refused() {  # OUTPUT, what the message must contain
  local out rc
  out=$(timeout 30 "$tool" "$dir/ck" "$1" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL: OUTPUT=$1: exit $rc (wanted 2): $out"; fail=1; return; fi
  case "$out" in
    *"ds-to-fp32: error: "*"$2"*) ;;
    *) echo "FAIL: OUTPUT=$1: message lacks 'ds-to-fp32: error: ...$2': $out"; fail=1 ;;
  esac
}

refused "$dir/ck/$tag/model.safetensors" "checkpoint directory being read"
refused "$dir/ck/$tag/manifest.json" "checkpoint directory being read"
refused "$dir/ck/$tag/optim_rank0.safetensors" "checkpoint directory being read"
refused "$dir/ck/$tag/fresh.safetensors" "checkpoint directory being read"
refused "$dir/ck/latest" "latest"
ln -s "$dir/ck/$tag/model.safetensors" "$dir/link.safetensors"
refused "$dir/link.safetensors" "own file"
ln "$dir/ck/$tag/manifest.json" "$dir/hard.json"
refused "$dir/hard.json" "own file"
mkfifo "$dir/pipe"
refused "$dir/pipe" "FIFO"
[ -p "$dir/pipe" ] || { echo "FAIL: the FIFO was replaced"; fail=1; }
refused "/dev/null" "device"
[ -c /dev/null ] || { echo "FAIL: /dev/null was replaced"; fail=1; }
mkdir "$dir/adir"
refused "$dir/adir" "directory"

after=$(snapshot)
[ "$before" = "$after" ] || { echo "FAIL: the checkpoint changed"; diff <(echo "$before") <(echo "$after"); fail=1; }
timeout 60 "$tool" "$dir/ck" "$dir/out.safetensors" >/dev/null || { echo "FAIL: conversion after the refusals"; fail=1; }
[ -s "$dir/out.safetensors" ] || { echo "FAIL: no output"; fail=1; }
# Nothing but the output is left in its directory.
left=$(ls -A "$dir" | grep -v -x -e ck -e link.safetensors -e hard.json -e pipe -e adir -e out.safetensors)
[ -z "$left" ] || { echo "FAIL: left behind: $left"; fail=1; }
[ $fail -eq 0 ] && echo "ds-to-fp32 output checks passed"
exit $fail
