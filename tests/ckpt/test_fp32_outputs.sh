#!/usr/bin/env bash
# ds-to-fp32 must not destroy its input nor replace special files
# (issue 8, "Tools that destroy their input"): OUTPUT = a file of the
# checkpoint read (model.safetensors, manifest.json, latest, an optimizer
# file, a link to one), any path inside the tag directory, a FIFO, a device
# or a directory is refused with "ds-to-fp32: error: ..." and exit status 2,
# leaving the checkpoint and OUTPUT as they were; the checkpoint still
# converts afterwards. Every run is bounded by timeout.
#   test_fp32_outputs.sh RESUME_DRIVER DS_TO_FP32
set -u
driver="$1"; tool="$2"
dir=$(mktemp -d /tmp/ds_fp32_out_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0
"$driver" fp32 save 2 "$dir/pristine" >/dev/null || { echo "cannot make a checkpoint"; exit 1; }
tag=$(cat "$dir/pristine/latest")
snapshot() { (cd "$dir/ck" && find . -type f | sort | xargs -r md5sum); }
cp -a "$dir/pristine" "$dir/ck"
want=$(snapshot)
fresh() { rm -rf "$dir/ck" && cp -a "$dir/pristine" "$dir/ck"; }  # each case starts from an intact checkpoint

refused() {  # OUTPUT, what the message must contain
  local out rc
  out=$(timeout 30 "$tool" "$dir/ck" "$1" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then echo "FAIL: OUTPUT=$1: exit $rc (wanted 2): $out"; fail=1
  else
    case "$out" in
      *"ds-to-fp32: error: "*"$2"*) ;;
      *) echo "FAIL: OUTPUT=$1: message lacks 'ds-to-fp32: error: ...$2': $out"; fail=1 ;;
    esac
  fi
  [ "$(snapshot)" = "$want" ] || { echo "FAIL: OUTPUT=$1: the checkpoint changed"; fail=1; }
}

fresh; refused "$dir/ck/$tag/model.safetensors" "checkpoint directory being read"
fresh; refused "$dir/ck/$tag/manifest.json" "checkpoint directory being read"
fresh; refused "$dir/ck/$tag/optim_rank0.safetensors" "checkpoint directory being read"
fresh; refused "$dir/ck/$tag/fresh.safetensors" "checkpoint directory being read"
fresh; refused "$dir/ck/latest" "latest"
fresh; ln -sfn "$dir/ck/$tag/model.safetensors" "$dir/link.safetensors"
refused "$dir/link.safetensors" "own file"
fresh; ln -f "$dir/ck/$tag/manifest.json" "$dir/hard.json"
refused "$dir/hard.json" "own file"
fresh; mkfifo "$dir/pipe"
refused "$dir/pipe" "FIFO"
[ -p "$dir/pipe" ] || { echo "FAIL: the FIFO was replaced"; fail=1; }
# A device node of our own (never a system one such as /dev/null: a tool
# without the check replaces it); creating one needs privileges.
if mknod "$dir/devnull" c 1 3 2>/dev/null; then
  fresh; refused "$dir/devnull" "device"
  [ -c "$dir/devnull" ] || { echo "FAIL: the device node was replaced"; fail=1; }
else
  echo "(mknod not permitted: device case skipped)"
fi
mkdir "$dir/adir"
fresh; refused "$dir/adir" "directory"
[ -d "$dir/adir" ] || { echo "FAIL: the directory was replaced"; fail=1; }

fresh
timeout 60 "$tool" "$dir/ck" "$dir/out.safetensors" >/dev/null || { echo "FAIL: conversion after the refusals"; fail=1; }
[ -s "$dir/out.safetensors" ] || { echo "FAIL: no output"; fail=1; }
# Nothing but the output is left in its directory.
left=$(ls -A "$dir" | grep -v -x -e pristine -e ck -e link.safetensors -e hard.json -e pipe -e adir -e devnull -e out.safetensors)
[ -z "$left" ] || { echo "FAIL: left behind: $left"; fail=1; }
[ $fail -eq 0 ] && echo "ds-to-fp32 output checks passed"
exit $fail
