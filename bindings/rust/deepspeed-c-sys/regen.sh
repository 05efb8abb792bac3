#!/bin/sh
# Regenerate src/bindings.rs from include/deepspeed_c.h (bindgen follows its
# #include "deepspeed_c/x.h" lines) with Debian's bindgen (0.60). The
# header-consistency test (tests/header_sync.rs) runs this same
# script into a temporary file and fails on any difference, so these flags are
# the only place they are written down.
#
#   regen.sh [HEADER [OUT]]   defaults: the repository's header, src/bindings.rs
#
# Constants are typed by use (the header's #defines carry no type): statuses,
# log levels, backends and the other integers are i32 (ds_status_t is int32_t);
# flag bits and the version numbers (ds_version/ds_abi_version return
# uint32_t) are u32.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
header=${1:-$here/../../../include/deepspeed_c.h}
out=${2:-$here/src/bindings.rs}
case $header in /*) ;; *) header=$(pwd)/$header ;; esac
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
command -v bindgen >/dev/null 2>&1 || { echo "regen.sh: bindgen not found (apt-get install bindgen)" >&2; exit 127; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Run from / so that the rustfmt bindgen calls (when one is on PATH) uses its
# defaults, not a rustfmt.toml around the caller's directory.
(cd / && bindgen "$header" \
    --allowlist-function 'ds_.*' --allowlist-type 'ds_.*' --allowlist-var 'DS_.*' --allowlist-type 'DLDataTypeCode' \
    --size_t-is-usize --default-macro-constant-type signed \
    --no-layout-tests --no-doc-comments --rust-target 1.47 \
    -- -x c -std=c99) >"$tmp"
# u32 constants: flag bits (DS_PARAM_TRAINABLE, DS_PARAM_EXPERT, DS_OFFLOAD_* state bits, DS_GRAD_*, DS_SAVE_*, DS_LOAD_*) and versions;
# usize: the frozen struct sizes (compared with struct_size: size_t).
# Not anchored to line starts: without rustfmt on PATH bindgen writes its
# output unformatted, several items to a line.
sed -E \
    -e 's/pub const (DS_PARAM_TRAINABLE|DS_PARAM_EXPERT|DS_OFFLOAD_[A-Z_]+_(STATES|PARAMS|GRADS|BUFFER)|DS_GRAD_[A-Z_]+|DS_SAVE_[A-Z_]+|DS_LOAD_[A-Z_]+|DS_VERSION_[A-Z_]+|DS_ABI_VERSION) ?: ?i32 ?= ?/pub const \1: u32 = /g' \
    -e 's/pub const (DS_[A-Z_]+_SIZE_V0) ?: ?i32 ?= ?/pub const \1: usize = /g' \
    "$tmp" >"$out.tmp.$$"
mv "$out.tmp.$$" "$out"
