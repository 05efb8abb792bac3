#!/usr/bin/env bash
# Install the built tree into a scratch prefix, then build a tiny consumer
# twice: with CMake's find_package(deepspeed_c) and with pkg-config.
set -euo pipefail
build="$1"; work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name "libdeepspeed_c.so" | head -1)")
cmake -S "$here" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake-build/consumer"
LD_LIBRARY_PATH="$libdir" "$work/cmake-build/consumer_cpp"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c99 -Wall -Werror "$here/consumer.c" $(pkg-config --cflags --libs deepspeed_c) -o "$work/consumer_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_pc"
c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror "$here/consumer.cpp" $(pkg-config --cflags --libs deepspeed_c) \
  -o "$work/consumer_cpp_pc"
LD_LIBRARY_PATH="$libdir" "$work/consumer_cpp_pc"
echo "install consumer OK (find_package and pkg-config)"
