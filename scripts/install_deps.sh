#!/usr/bin/env bash
# Install every system dependency of deepspeed_c on Debian (bookworm).
# Idempotent and quiet when everything is already there. Needs root (or sudo).
#   --build-only   only what the C/C++ library and its C/C++ tests need to build
#                  (scripts/gpu_check.sh on a bare GPU machine)
#   --print-build  print that list and exit
set -euo pipefail

# The library and its C/C++ tests (required: cJSON, dlpack, GoogleTest,
# pkg-config; MPI for the mpi tests).
BUILD_PACKAGES=(
  build-essential cmake pkg-config git
  libcjson-dev libdlpack-dev
  libgtest-dev googletest
  libopenmpi-dev openmpi-bin
)
case "${1:-}" in
  --print-build) echo "${BUILD_PACKAGES[@]}"; exit 0 ;;
  --build-only) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  "") PACKAGES=("${BUILD_PACKAGES[@]}"
        libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
        python3 python3-dev python3-venv python3-numpy python3-torch) ;;
  *) echo "usage: $0 [--build-only | --print-build]" >&2; exit 2 ;;
esac
if [ "${1:-}" = "" ]; then
  # The Rust bindings: bindgen (loads libclang) regenerates and checks the -sys
  # crate; Debian's cargo (1.63) only where no cargo is on PATH.
  PACKAGES+=(bindgen libclang-dev)
  # NVMe optimizer state (src/zero/aio_file.h): libaio.so.1 is loaded at run
  # time when present (io_uring needs no library; pread is the fallback).
  PACKAGES+=(libaio1)
  command -v cargo >/dev/null 2>&1 || PACKAGES+=(cargo)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
