/*
 * Reduction kernel bandwidth (dr_gpu_reduce) against the device's memory
 * bandwidth. A reduction reads in and inout and writes inout: 3 x size bytes
 * move per call. Two references are printed:
 *   - measured: cudaMemcpy device-to-device of the same size (2 x size bytes
 *     per copy), what this device actually sustains;
 *   - theoretical: 2 x memory clock x bus width (cudaDevAttrMemoryClockRate,
 *     cudaDevAttrGlobalMemoryBusWidth), which HBM parts do not quite report
 *     faithfully; the measured copy is the one the target refers to.
 *
 *   dualrail-gpu-reduce-bench [MiB]     (default 256)
 *
 * Exit 77 without a usable GPU. GB = 10^9 bytes.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "gpu/dr_gpu.h"

namespace {

float time_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms;
}

} // namespace

int main(int argc, char **argv)
{
    const size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 256;
    if (!dr_mem_cuda()->available()) {
        printf("no usable GPU: kernel bandwidth not measured\n");
        return 77;
    }
    const size_t bytes = mib << 20;
    int dev = 0, clock_khz = 0, bus_bits = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
    const double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8.0 / 1e9;
    void *a = nullptr, *b = nullptr;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
        fprintf(stderr, "cannot allocate 2 x %zu MiB on the device\n", mib);
        return 1;
    }
    cudaMemset(a, 0, bytes);
    cudaMemset(b, 0, bytes);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int iters = 20;
    /* Reference: device-to-device copy. */
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
    cudaEventRecord(e0, s);
    for (int i = 0; i < iters; ++i) {
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
    }
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    const double copy_gbs = 2.0 * bytes * iters / (time_ms(e0, e1) / 1e3) / 1e9;
    printf("# device %d: %zu MiB; memcpy d2d %.0f GB/s measured; theoretical %.0f GB/s "
           "(%d kHz x %d bit x 2)\n",
           dev, mib, copy_gbs, peak, clock_khz, bus_bits);
    printf("# %-6s %-5s %10s %12s %12s\n", "op", "type", "GB/s", "% of d2d", "% of theor.");
    const int ops[] = {DR_GPU_SUM, DR_GPU_SUM, DR_GPU_SUM, DR_GPU_SUM, DR_GPU_MAX, DR_GPU_BXOR};
    const int types[] = {DR_GPU_F32, DR_GPU_BF16, DR_GPU_F64, DR_GPU_U8, DR_GPU_F16, DR_GPU_U64};
    int below = 0;
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); ++k) {
        const size_t count = bytes / dr_gpu_type_size(types[k]);
        dr_gpu_reduce(ops[k], types[k], a, b, count, s); /* warm-up */
        cudaEventRecord(e0, s);
        for (int i = 0; i < iters; ++i) {
            dr_gpu_reduce(ops[k], types[k], a, b, count, s);
        }
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        const double gbs = 3.0 * bytes * iters / (time_ms(e0, e1) / 1e3) / 1e9;
        printf("  %-6s %-5s %10.0f %11.1f%% %11.1f%%\n", dr_gpu_op_name(ops[k]),
               dr_gpu_type_name(types[k]), gbs, 100.0 * gbs / copy_gbs,
               peak > 0 ? 100.0 * gbs / peak : 0.0);
        below += k == 0 && gbs < 0.8 * copy_gbs;
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "cuda error: %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("target (f32 sum >= 80%% of the measured d2d bandwidth at %zu MiB): %s\n", mib,
           below ? "NOT MET" : "met");
    cudaFree(a);
    cudaFree(b);
    return 0;
}
