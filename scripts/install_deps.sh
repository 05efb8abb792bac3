#!/usr/bin/env bash
# Install every system dependency of deepspeed_c on Debian (bookworm).
# Idempotent and quiet when everything is already there. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  libcjson-dev libdlpack-dev
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  libgtest-dev googletest
  libopenmpi-dev openmpi-bin
  python3 python3-dev python3-venv python3-numpy python3-torch
)
# The Rust bindings: bindgen (loads libclang) regenerates and checks the -sys
# crate; Debian's cargo (1.63) only where no cargo is on PATH.
PACKAGES+=(bindgen libclang-dev)
# NVMe optimizer state (src/zero/aio_file.h): libaio.so.1 is loaded at run
# time when present (io_uring needs no library; pread is the fallback).
PACKAGES+=(libaio1)
command -v cargo >/dev/null 2>&1 || PACKAGES+=(cargo)

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
