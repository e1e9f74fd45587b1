#!/bin/bash
# The GPU check, in one go, on a machine with an NVIDIA GPU, nvcc and CMake
# but no UCX, hwloc, cmocka, MPI or package access. Run tests/gpu/prepare.sh
# first on a Debian 12 machine and bring .gpu-deps/ along (device runs: carry
# ".gpu-deps"). Fits ten minutes: build (MPI-free: ucx_mr, algorithms, GPU
# code, tests), unit tests, then
#   1. reduction kernels against the host reference: every op x type,
#      counts 0 .. 1 Mi elements, five alignments, 256 MiB per type;
#   2. kernel bandwidth at 256 MiB against the measured device-to-device copy
#      and the theoretical peak (target: >= 80%);
#   3. the staged pipeline end to end: two processes over ucx_mr on loopback
#      (two planes, lo and the first other interface with an IPv4 address,
#      when there is one), results checked, and the device/host bandwidth
#      ratio at 64 MiB (target: >= 0.8).
#
#   tests/gpu/run.sh                 everything
#   DR_GPU_SKIP=1 tests/gpu/run.sh   build and unit tests only (any machine)
#   DR_CUDA=OFF ...                  build without CUDA (checks the carried deps alone)
#
# Output: the log on stdout, and in $OUT/gpu-run.log when $OUT is set.
# Exit status: 0 when every step passed (GPU steps skipped only with DR_GPU_SKIP).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
deps=$root/.gpu-deps
build=${DR_BUILD_DIR:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
log=${OUT:+$OUT/gpu-run.log}
exec > >(tee ${log:+"$log"}) 2>&1
start=$(date +%s)
say() { echo "== $(($(date +%s) - start)) s: $*"; }
fail=0
step() { # name, timeout seconds, command...
    local name=$1 limit=$2
    shift 2
    say "$name"
    timeout "$limit" "$@"
    local rc=$?
    case $rc in
    0) echo "RESULT $name: pass" ;;
    77) echo "RESULT $name: skipped (no usable GPU)"
        [ -n "${DR_GPU_SKIP:-}" ] || fail=1 ;;
    124) echo "RESULT $name: FAIL (over ${limit} s)"; fail=1 ;;
    *) echo "RESULT $name: FAIL (exit $rc)"; fail=1 ;;
    esac
}

if [ ! -d "$deps" ]; then
    echo "run.sh: $deps is missing: run tests/gpu/prepare.sh on a Debian 12 machine and carry it" >&2
    exit 2
fi
triplet=x86_64-linux-gnu
export PKG_CONFIG_LIBDIR=$deps/usr/lib/$triplet/pkgconfig:$deps/usr/share/pkgconfig
export LD_LIBRARY_PATH=$deps/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
pkgconfig=$(command -v pkg-config || true)
[ -n "$pkgconfig" ] || pkgconfig=$deps/usr/bin/pkgconf

gpu=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)
say "machine: $(uname -n), $jobs cores; GPU: ${gpu:-none seen by nvidia-smi}"
cuda=${DR_CUDA:-ON}
archs=""
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
[ -n "$cap" ] && archs="-DCMAKE_CUDA_ARCHITECTURES=$cap" # only this GPU's: halves the kernel build
nvcc=""
[ -x /usr/local/cuda/bin/nvcc ] && nvcc="-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc"
mkdir -p "$build"
say "configure (DUALRAIL_GPU_ONLY, CUDA $cuda ${archs#-D})"
cmake -S "$root" -B "$build" -DDUALRAIL_GPU_ONLY=ON -DDUALRAIL_CUDA="$cuda" \
    -DCMAKE_BUILD_TYPE=Release -DPKG_CONFIG_EXECUTABLE="$pkgconfig" $archs $nvcc >"$build/cmake.log" 2>&1 ||
    { cat "$build/cmake.log"; echo "RESULT configure: FAIL"; exit 1; }
grep "DualRail:" "$build/cmake.log"
say "build"
cmake --build "$build" -j"$jobs" >"$build/build.log" 2>&1 ||
    { tail -50 "$build/build.log"; echo "RESULT build: FAIL"; exit 1; }
echo "RESULT build: pass"

step "unit tests (ctest -L unit)" 240 ctest --test-dir "$build" -L unit -j"$jobs" --output-on-failure

if [ -z "${DR_GPU_SKIP:-}" ]; then
    planes=lo
    other=$(ip -4 -o addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
    [ -n "$other" ] && planes="lo,$other"
    step "kernels vs host reference" 240 "$build/tests/gpu/test_gpu_kernels"
    step "kernel bandwidth" 60 "$build/tests/gpu/dualrail-gpu-reduce-bench" 256
    step "staged pipeline, 2 processes, planes $planes" 240 \
        "$build/tests/gpu/test_gpu_pipeline" --planes "$planes" --perf-mib 64
    step "ctest -L gpu (skipped means no GPU)" 60 ctest --test-dir "$build" -L gpu -R gpu_reduce_bench
else
    echo "RESULT GPU steps: not run (DR_GPU_SKIP)"
fi
say "done: $([ $fail = 0 ] && echo 'every step passed' || echo 'FAILURES above')"
exit $fail
