#!/usr/bin/env bash
# Only ds_* symbols may be exported by the shared library, and every function
# the header declares must be among them.
set -euo pipefail
lib="$1"; header="$2"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
bad=$(echo "$exported" | grep -v '^ds_' || true)
if [ -n "$bad" ]; then
  echo "non-ds_ symbols exported by $lib:"; echo "$bad" | head -20; exit 1
fi
# The umbrella header and the sub-headers it includes (#include "deepspeed_c/x.h").
headers=("$header")
for sub in $(sed -n 's|^#include "\(deepspeed_c/[a-z0-9_]*\.h\)"$|\1|p' "$header"); do
  headers+=("$(dirname "$header")/$sub")
done
declared=$(cat "${headers[@]}" | grep -oE 'DS_API[^;(]*[ *]ds_[a-z0-9_]+[ ]*\(' | grep -oE 'ds_[a-z0-9_]+[ ]*\($' | tr -d ' (' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported") || true)
if [ -n "$missing" ]; then echo "declared but not exported: $missing"; exit 1; fi
echo "exports OK: $(echo "$exported" | wc -l) symbols, all ds_*; $(echo "$declared" | wc -l) declared"
