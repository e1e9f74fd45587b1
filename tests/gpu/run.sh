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
#   DR_CUDA_ARCHS="90" ...           CUDA architectures (default: the GPU's, from
#                                    nvidia-smi; without it CMakeLists' 80 90)
#   DR_BUILD_DIR=dir ...             build there (default build-gpu/)
#   DR_GPU_PLANES=lo ...             the pipeline's planes (default: lo and the
#                                    first other interface with an IPv4 address)
#
# Rehearse it on Debian 12 as the GPU machine sees it: sudo tests/gpu/simulate.sh.
# Only bash, coreutils, CMake and a compiler are taken for granted: Ninja is
# used when there is no make, and tee, timeout, awk, ip and nvidia-smi are
# optional (without ip the pipeline runs on the lo plane alone).
#
# Output: the log on stdout, and in $OUT/gpu-run.log when $OUT is set.
# Exit status: 0 when every step passed (GPU steps skipped only with DR_GPU_SKIP).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
deps=$root/.gpu-deps
build=${DR_BUILD_DIR:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
log=${OUT:+$OUT/gpu-run.log}
[ -z "$log" ] || mkdir -p "$OUT"
have() { command -v "$1" >/dev/null 2>&1; }
teepid=""
if have tee; then
    exec > >(tee ${log:+"$log"}) 2>&1
    teepid=$!
else
    exec 2>&1
    [ -z "$log" ] || echo "run.sh: no tee here: the log is on stdout only, not in $log"
fi
# Let tee write its last lines before the script's exit status is reported.
finish() {
    exec >&- 2>&-
    [ -z "$teepid" ] || wait "$teepid" 2>/dev/null
}
trap finish EXIT
start=$(date +%s)
say() { echo "== $(($(date +%s) - start)) s: $*"; }
fail=0
step() { # name, timeout seconds, command...
    local name=$1 limit=$2
    shift 2
    say "$name"
    if have timeout; then
        timeout "$limit" "$@"
    else
        "$@" # no timeout(1): ctest's own TIMEOUTs still bound the test runs
    fi
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
# Only the carried .pc files: nothing of the machine's own pkg-config set.
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_LIBDIR=$deps/usr/lib/$triplet/pkgconfig:$deps/usr/share/pkgconfig
export LD_LIBRARY_PATH=$deps/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# fallback/ (libudev.so.1, needed by libhwloc) only where the machine lacks it:
# it must not shadow the machine's own, newer copy.
system_has() { # soname
    { have ldconfig && ldconfig -p 2>/dev/null | grep -cE "^[[:space:]]+${1//./\\.} \(" >/dev/null; } && return 0
    local d
    for d in /lib/$triplet /usr/lib/$triplet /lib64 /usr/lib64 /lib /usr/lib; do
        [ -e "$d/$1" ] && return 0
    done
    return 1
}
for lib in "$deps/fallback/usr/lib/$triplet"/*.so.*; do
    [ -e "$lib" ] || continue
    case ${lib##*/} in *.so.*.*) continue ;; esac # the soname links only
    if ! system_has "${lib##*/}"; then
        echo "run.sh: no ${lib##*/} on this machine: using the one in .gpu-deps/fallback"
        export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$deps/fallback/usr/lib/$triplet
        break
    fi
done
pkgconfig=$(command -v pkg-config || true)
[ -n "$pkgconfig" ] || pkgconfig=$deps/usr/bin/pkgconf

gpu="" cap=""
# nvidia-smi comes with the driver; in containers it may sit off the PATH.
smi=$(command -v nvidia-smi || true)
for f in /usr/local/nvidia/bin/nvidia-smi /usr/bin/nvidia-smi; do
    [ -n "$smi" ] || { [ -x "$f" ] && smi=$f; }
done
if [ -n "$smi" ]; then
    gpu=$("$smi" --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null | head -1)
    cap=$("$smi" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
fi
say "machine: $(uname -n), $jobs cores; GPU: ${gpu:-none seen by nvidia-smi}"
cuda=${DR_CUDA:-ON}
archs=()
case $cap in *[!0-9]* | "") cap="" ;; esac # "[N/A]" and the like: keep CMakeLists' list
[ -n "$cap" ] && archs=(-DCMAKE_CUDA_ARCHITECTURES="$cap") # only this GPU's: halves the kernel build
[ -n "${DR_CUDA_ARCHS:-}" ] && archs=(-DCMAKE_CUDA_ARCHITECTURES="${DR_CUDA_ARCHS// /;}")
nvcc=()
[ -x /usr/local/cuda/bin/nvcc ] && nvcc=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
mkdir -p "$build"
# pkg_check_modules keeps what it found in CMakeCache.txt and never asks again:
# a .gpu-deps prepared anew (or moved) needs a fresh cache.
stamp=$(cd "$deps" && { echo "$deps"; cat PACKAGES usr/lib/$triplet/pkgconfig/*.pc; } 2>/dev/null | cksum)
if [ -f "$build/CMakeCache.txt" ] && [ "$(cat "$build/gpu-deps.stamp" 2>/dev/null)" != "$stamp" ]; then
    echo "run.sh: .gpu-deps changed since $build was configured: configuring afresh"
    rm -f "$build/CMakeCache.txt"
fi
echo "$stamp" > "$build/gpu-deps.stamp"
# Ninja when there is no make; a configured build directory keeps its generator.
gen=()
if [ ! -f "$build/CMakeCache.txt" ] && [ -z "${CMAKE_GENERATOR:-}" ]; then
    if have ninja; then
        gen=(-G Ninja)
    elif ! have make; then
        echo "run.sh: neither ninja nor make is installed" >&2
        echo "RESULT configure: FAIL"
        exit 1
    fi
fi
say "configure (DUALRAIL_GPU_ONLY, CUDA $cuda ${archs[*]#-D} ${gen[*]})"
cmake -S "$root" -B "$build" "${gen[@]}" -DDUALRAIL_GPU_ONLY=ON -DDUALRAIL_CUDA="$cuda" \
    -DCMAKE_BUILD_TYPE=Release -DPKG_CONFIG_EXECUTABLE="$pkgconfig" "${archs[@]}" "${nvcc[@]}" >"$build/cmake.log" 2>&1 ||
    { cat "$build/cmake.log"; echo "RESULT configure: FAIL"; exit 1; }
grep "DualRail:" "$build/cmake.log"
say "build"
cmake --build "$build" -j"$jobs" >"$build/build.log" 2>&1 ||
    { tail -50 "$build/build.log"; echo "RESULT build: FAIL"; exit 1; }
echo "RESULT build: pass"

step "unit tests (ctest -L unit)" 240 ctest --test-dir "$build" -L unit -j"$jobs" --output-on-failure

if [ -z "${DR_GPU_SKIP:-}" ]; then
    planes=lo
    other=""
    # The second plane: the first other interface with an IPv4 address. No ip
    # (iproute2) or awk on the machine: lo alone. DR_GPU_PLANES overrides.
    if have ip && have awk; then
        other=$(ip -4 -o addr show up 2>/dev/null | awk '$2 != "lo" {sub(/@.*/, "", $2); print $2; exit}')
    fi
    [ -n "$other" ] && planes="lo,$other"
    planes=${DR_GPU_PLANES:-$planes}
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
