/*
 * Reduction kernels on a real GPU against the host reference (the same
 * element operations, dr_gpu_ops.hpp), bit for bit: every (op, type) the
 * kernels implement, sizes 0 .. 1 Mi elements with start offsets that break
 * every alignment (element offsets that differ between in and inout, and
 * pointers that are not even element-aligned), then 256 MiB per type.
 * Floating inputs include NaNs with payloads, infinities, signed zeros and
 * subnormals: NaN results must carry the same bits as the reference's.
 * Exit 77 (ctest: skipped) when no GPU is usable.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu/dr_gpu.h"
#include "gpu/dr_gpu_ops.hpp"
#include "../support/test_helpers.hpp"

using dualrail::test::mix;

namespace {

/*
 * Floating specials, one element in 16: NaNs with payloads and either sign,
 * infinities, signed zeros, subnormals. The reference and the kernels agree
 * on NaN bits too (dr_gpu_ops.hpp: canonical NaN results, min/max keep bits).
 */
bool special(int type, uint64_t r, unsigned char *e)
{
    if (((r >> 56) & 15) != 0) {
        return false;
    }
    const unsigned k = (unsigned)(r >> 52) & 7;
    switch (type) {
    case DR_GPU_F32: {
        const uint32_t v[8] = {0x7fc00001u, 0xff800123u, 0x7f800000u, 0xff800000u,
                               0x80000000u, 0x00000000u, 0x00000003u, 0x807fffffu};
        memcpy(e, &v[k], 4);
        return true;
    }
    case DR_GPU_F64: {
        const uint64_t v[8] = {0x7ff8000000000001ull, 0xfff0000000000123ull, 0x7ff0000000000000ull,
                               0xfff0000000000000ull, 0x8000000000000000ull, 0,
                               0x0000000000000003ull, 0x800fffffffffffffull};
        memcpy(e, &v[k], 8);
        return true;
    }
    case DR_GPU_F16: {
        const uint16_t v[8] = {0x7e01, 0xfd23, 0x7c00, 0xfc00, 0x8000, 0x0000, 0x0003, 0x83ff};
        memcpy(e, &v[k], 2);
        return true;
    }
    case DR_GPU_BF16: {
        const uint16_t v[8] = {0x7fc1, 0xff83, 0x7f80, 0xff80, 0x8000, 0x0000, 0x0003, 0x807f};
        memcpy(e, &v[k], 2);
        return true;
    }
    default:
        return false;
    }
}

/* Values that exercise wrapping and rounding, and the floating specials. */
void fill(int type, unsigned char *p, size_t count, uint64_t salt)
{
    const size_t esz = dr_gpu_type_size(type);
    for (size_t i = 0; i < count; ++i) {
        const uint64_t r = mix(i * 0x9e3779b97f4a7c15ULL + salt);
        unsigned char *e = p + i * esz;
        if (special(type, r, e)) {
            continue;
        }
        switch (type) {
        case DR_GPU_F32: {
            const float f = (float)((double)(int64_t)(r % 2000001 - 1000000) / 1024.0);
            memcpy(e, &f, 4);
            break;
        }
        case DR_GPU_F64: {
            const double d = (double)(int64_t)(r % 200000001 - 100000000) / 4096.0;
            memcpy(e, &d, 8);
            break;
        }
        case DR_GPU_F16: {
            uint16_t h = (uint16_t)(r & 0xffff);
            if ((h & 0x7c00) == 0x7c00) {
                h &= 0xbfff; /* inf and nan only from special() */
            }
            memcpy(e, &h, 2);
            break;
        }
        case DR_GPU_BF16: {
            uint16_t h = (uint16_t)(r & 0xffff);
            if ((h & 0x7f80) == 0x7f80) {
                h &= 0xbfff;
            }
            memcpy(e, &h, 2);
            break;
        }
        default:
            /* Integers: some zeros so the logical ops see both truth values. */
            memcpy(e, &r, esz);
            if ((r >> 60) == 0) {
                memset(e, 0, esz);
            }
        }
    }
}

int g_failures = 0;

bool check(int op, int type, size_t count, size_t off_in, size_t off_io, cudaStream_t s)
{
    const size_t esz = dr_gpu_type_size(type);
    const size_t bytes = count * esz;
    const size_t pad = 64;
    std::vector<unsigned char> in(bytes + pad), io(bytes + pad), want, got(bytes + pad);
    fill(type, in.data() + off_in, count, 1 + (uint64_t)op * 131 + (uint64_t)type);
    fill(type, io.data() + off_io, count, 2 + (uint64_t)op * 137 + (uint64_t)type);
    memset(io.data(), 0x5a, off_io); /* guards around inout */
    memset(io.data() + off_io + bytes, 0xa5, pad - off_io);
    want = io;
    dualrail::gpu::host_reduce(op, type, in.data() + off_in, want.data() + off_io, count);
    unsigned char *din = nullptr, *dio = nullptr;
    if (cudaMalloc(&din, bytes + pad) != cudaSuccess ||
        cudaMalloc(&dio, bytes + pad) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc of %zu bytes failed\n", bytes + pad);
        exit(1);
    }
    cudaMemcpy(din, in.data(), bytes + pad, cudaMemcpyHostToDevice);
    cudaMemcpy(dio, io.data(), bytes + pad, cudaMemcpyHostToDevice);
    dr_status_t st = dr_gpu_reduce(op, type, din + off_in, dio + off_io, count, s);
    cudaStreamSynchronize(s);
    cudaMemcpy(got.data(), dio, bytes + pad, cudaMemcpyDeviceToHost);
    cudaFree(din);
    cudaFree(dio);
    const bool ok = st == DR_OK && memcmp(got.data(), want.data(), bytes + pad) == 0;
    if (!ok) {
        size_t i = 0;
        while (i < bytes + pad && got[i] == want[i]) {
            ++i;
        }
        if (++g_failures <= 20) {
            fprintf(stderr,
                    "FAIL %s %s count %zu offsets in %zu inout %zu bytes: status %d, first "
                    "difference at byte %zu\n",
                    dr_gpu_op_name(op), dr_gpu_type_name(type), count, off_in, off_io, (int)st, i);
        }
    }
    return ok;
}

/*
 * An error the application left pending (a runtime call it did not check)
 * neither fails a reduction nor is swallowed by it: the launch's own status
 * decides, and the application still finds its error afterwards.
 */
void check_pending_error(cudaStream_t s)
{
    float *d = nullptr;
    if (cudaMalloc(&d, 64 * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    int n = 0;
    cudaGetDeviceCount(&n);
    (void)cudaSetDevice(n + 7); /* cudaErrorInvalidDevice, left pending as an application would */
    if (cudaPeekAtLastError() == cudaSuccess) {
        printf("pending application error: the runtime keeps none here, not checked\n");
    } else {
        const dr_status_t st = dr_gpu_reduce(DR_GPU_SUM, DR_GPU_F32, d, d + 32, 32, s);
        const cudaError_t left = cudaGetLastError();
        if (st != DR_OK || left != cudaErrorInvalidDevice) {
            fprintf(stderr, "FAIL pending application error: reduce status %d, error left %s\n",
                    (int)st, cudaGetErrorName(left));
            ++g_failures;
        }
    }
    cudaStreamSynchronize(s);
    cudaFree(d);
}

/*
 * Pointer classes as the driver reports them: pageable and pinned host memory
 * are host memory, cudaMalloc'ed memory (and an address inside it) is device
 * memory of this device, managed memory is managed; the current device is
 * the runtime's, and entering another device and leaving gives the thread its
 * context back; none of it leaves an error pending.
 */
void check_pointer_kinds()
{
    const dr_mem_ops_t *m = dr_mem_cuda();
    int stack = 0, cur = -1;
    std::vector<char> heap(4096);
    void *pinned = nullptr, *dev = nullptr, *managed = nullptr;
    if (cudaHostAlloc(&pinned, 4096, cudaHostAllocPortable) != cudaSuccess ||
        cudaMalloc(&dev, 4096) != cudaSuccess ||
        cudaMallocManaged(&managed, 4096, cudaMemAttachGlobal) != cudaSuccess) {
        fprintf(stderr, "allocation for the pointer kinds failed\n");
        exit(1);
    }
    cudaGetDevice(&cur);
    struct {
        const char *what;
        const void *p;
        dr_mem_kind_t kind;
        int device;
    } cases[] = {
        {"stack", &stack, DR_MEM_HOST, -1},
        {"heap", heap.data() + 1, DR_MEM_HOST, -1},
        {"pinned", static_cast<char *>(pinned) + 100, DR_MEM_HOST, -1},
        {"device", dev, DR_MEM_DEVICE, cur},
        {"device + 4095", static_cast<char *>(dev) + 4095, DR_MEM_DEVICE, cur},
        /* managed: this device or -1 (then the staging takes the current device) */
        {"managed", static_cast<char *>(managed) + 8, DR_MEM_MANAGED, cur},
    };
    for (const auto &c : cases) {
        const dr_mem_kind_t k = m->kind(c.p);
        const int d = m->device_of(c.p);
        const bool managed_ok = c.kind == DR_MEM_MANAGED && d == -1;
        if (k != c.kind || (d != c.device && !managed_ok)) {
            fprintf(stderr, "FAIL pointer kind of %s: kind %d device %d, expected %d and %d\n",
                    c.what, (int)k, d, (int)c.kind, c.device);
            ++g_failures;
        }
    }
    if (m->device_current() != cur) {
        fprintf(stderr, "FAIL device_current: %d, runtime %d\n", m->device_current(), cur);
        ++g_failures;
    }
    void *saved = nullptr;
    int after = -1;
    if (m->device_enter(cur, &saved) != DR_OK) {
        fprintf(stderr, "FAIL device_enter(%d): %s\n", cur, m->last_error());
        ++g_failures;
    } else {
        m->device_leave(saved);
        cudaGetDevice(&after);
        if (after != cur) {
            fprintf(stderr, "FAIL device_leave: on device %d, was %d\n", after, cur);
            ++g_failures;
        }
    }
    /* A thread that never touched CUDA has no context, and must have none after a call. */
    void *get = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000, cudaEnableDefault, &q) ==
            cudaSuccess &&
        q == cudaDriverEntryPointSuccess) {
        std::thread([&] {
            CUcontext before = nullptr, ctx = nullptr;
            reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(get)(&before);
            void *sv = nullptr;
            if (before == nullptr && m->device_enter(cur, &sv) == DR_OK) {
                m->device_leave(sv);
                reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(get)(&ctx);
                if (ctx != nullptr) {
                    fprintf(stderr, "FAIL device_leave left a context on a fresh thread\n");
                    ++g_failures;
                }
            }
        }).join();
    }
    if (cudaPeekAtLastError() != cudaSuccess) {
        fprintf(stderr, "FAIL pointer queries left an error pending: %s\n",
                cudaGetErrorName(cudaGetLastError()));
        ++g_failures;
    }
    cudaFreeHost(pinned);
    cudaFree(dev);
    cudaFree(managed);
}

} // namespace

int main(int argc, char **argv)
{
    (void)argv;
    const bool quick = argc > 1; /* any argument: skip the 256 MiB pass */
    if (!dr_mem_cuda()->available()) {
        printf("no usable GPU (or no driver): GPU kernel tests skipped\n");
        return 77;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("device 0: %s, sm_%d%d\n", prop.name, prop.major, prop.minor);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    check_pointer_kinds();
    check_pending_error(s);
    const auto t0 = std::chrono::steady_clock::now();
    const size_t counts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 255, 1000, 4097, 65537, 1048579};
    /* (in, inout) byte offsets: aligned, equal misalignment (vector body), different
     * misalignment (scalar path), not element-aligned (byte path). */
    const size_t offs[][2] = {{0, 0}, {8, 8}, {16, 8}, {1, 1}, {3, 5}};
    size_t cases = 0;
    for (int op = 0; op < DR_GPU_OP_COUNT; ++op) {
        for (int type = 0; type < DR_GPU_TYPE_COUNT; ++type) {
            if (!dr_gpu_op_valid(op, type)) {
                if (dr_gpu_reduce(op, type, nullptr, nullptr, 1, s) != DR_ERR_INVALID) {
                    fprintf(stderr, "FAIL %s %s accepted\n", dr_gpu_op_name(op),
                            dr_gpu_type_name(type));
                    ++g_failures;
                }
                continue;
            }
            for (size_t c : counts) {
                for (const auto &o : offs) {
                    check(op, type, c, o[0], o[1], s);
                    ++cases;
                }
            }
        }
    }
    printf("kernels: %zu cases (every op x type, counts 0..1048579, 5 alignments): %s (%.1f s)\n",
           cases, g_failures ? "FAIL" : "ok",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!quick) {
        const auto t1 = std::chrono::steady_clock::now();
        const int big_ops[] = {DR_GPU_SUM, DR_GPU_MAX, DR_GPU_PROD};
        int k = 0;
        for (int type = 0; type < DR_GPU_TYPE_COUNT; ++type) {
            const size_t esz = dr_gpu_type_size(type);
            const size_t count = (256u << 20) / esz;
            /* An unaligned start (one element in: head, vectors, tail) for every type. */
            check(big_ops[k++ % 3], type, count - 1, esz, esz, s);
        }
        /* Different misalignment of in and inout (the scalar path) at full size. */
        check(DR_GPU_SUM, DR_GPU_F32, (256u << 20) / 4 - 1, 0, 4, s);
        printf(
            "kernels at 256 MiB: every type unaligned, f32 with in/inout misaligned: %s (%.1f s)\n",
            g_failures ? "FAIL" : "ok",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    }
    cudaStreamDestroy(s);
    return g_failures ? 1 : 0;
}
