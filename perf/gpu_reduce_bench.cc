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
 * Exit 0 when the f32 sum reaches 80% of the measured copy, 1 when it does
 * not or when any CUDA call or reduction failed (a failed launch would
 * otherwise time as an absurd bandwidth), 77 without a usable GPU.
 * GB = 10^9 bytes.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "gpu/dr_gpu.h"

namespace {

/* Exits on a CUDA error: a number measured over failed work means nothing. */
void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

/* Milliseconds between two events recorded on one stream, once the second is reached. */
float time_ms(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    check(cudaEventSynchronize(b), "event synchronize (the timed work failed)");
    check(cudaEventElapsedTime(&ms, a, b), "event elapsed time");
    return ms;
}

void reduce(int op, int type, const void *in, void *inout, size_t count, cudaStream_t s)
{
    const dr_status_t st = dr_gpu_reduce(op, type, in, inout, count, s);
    if (st != DR_OK) {
        fprintf(stderr, "dr_gpu_reduce %s %s: %s\n", dr_gpu_op_name(op), dr_gpu_type_name(type),
                dr_mem_cuda()->last_error());
        exit(1);
    }
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
    check(cudaMemset(a, 0, bytes), "memset");
    check(cudaMemset(b, 0, bytes), "memset");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream create");
    cudaEvent_t e0, e1; /* timing events (the library's own disable timing) */
    check(cudaEventCreate(&e0), "event create");
    check(cudaEventCreate(&e1), "event create");
    const int iters = 20;
    /* Reference: device-to-device copy, after one untimed copy. */
    check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s), "copy");
    check(cudaEventRecord(e0, s), "event record");
    for (int i = 0; i < iters; ++i) {
        check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s), "copy");
    }
    check(cudaEventRecord(e1, s), "event record");
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
        reduce(ops[k], types[k], a, b, count, s); /* warm-up: loads the kernel (lazy loading) */
        check(cudaEventRecord(e0, s), "event record");
        for (int i = 0; i < iters; ++i) {
            reduce(ops[k], types[k], a, b, count, s);
        }
        check(cudaEventRecord(e1, s), "event record");
        const double gbs = 3.0 * bytes * iters / (time_ms(e0, e1) / 1e3) / 1e9;
        printf("  %-6s %-5s %10.0f %11.1f%% %11.1f%%\n", dr_gpu_op_name(ops[k]),
               dr_gpu_type_name(types[k]), gbs, 100.0 * gbs / copy_gbs,
               peak > 0 ? 100.0 * gbs / peak : 0.0);
        below += k == 0 && gbs < 0.8 * copy_gbs;
    }
    check(cudaStreamSynchronize(s), "stream synchronize");
    printf("target (f32 sum >= 80%% of the measured d2d bandwidth at %zu MiB): %s\n", mib,
           below ? "NOT MET" : "met");
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    return below ? 1 : 0;
}
