#!/usr/bin/env bash
# Set-up, configure, build into build/ and run every test (ctest). Needs root:
# the lab tests build network namespaces. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "$(id -u)" -ne 0 ]; then
  echo "test.sh: the lab tests need root (network namespaces); run as root" >&2
  exit 1
fi
./contrib/setup.sh
cmake -S . -B build -DDUALRAIL_WERROR=ON ${DUALRAIL_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure --timeout 900 "$@"
