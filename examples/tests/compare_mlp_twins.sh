#!/bin/sh
# train_mlp (C) and train_mlp_cpp (C++ wrapper) are the same program: with the
# same options their verdict lines (mean losses to 5 decimals) must be equal.
set -eu
c_bin="$1"; cpp_bin="$2"; shift 2
c_line=$("$c_bin" "$@" | tail -n 1)
cpp_line=$("$cpp_bin" "$@" | tail -n 1)
echo "C:   $c_line"
echo "C++: $cpp_line"
[ "$c_line" = "$cpp_line" ] || { echo "the C and C++ examples differ"; exit 1; }
echo "twins agree"
